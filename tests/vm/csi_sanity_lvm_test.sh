#!/bin/bash
# Runs inside a vm-run guest (vm_csi_sanity_lvm, through csi_sanity_lvm_run):
# tests/csi/csi_sanity_test.sh against a nodevold whose pool is thin LVM on
# the scratch disk "lvm1" (>= 512M), VG and thin pool built by nodevold,
# ext4 (the pool default: xfs cannot be made below 300 MiB), 64 MiB
# volumes, mount access, then raw block access (the device bound onto a
# file at kubelet's block publish path). Then no LV of a volume may be
# left in the VG.
#   csi_sanity_lvm_test.sh CSI_SANITY_TEST
# Needs NODEVOLD and CSI_SANITY in the environment.
source "$VM_LIB"
csi_test=${1:?usage: csi_sanity_lvm_test.sh CSI_SANITY_TEST}
: "${NODEVOLD:?}" "${CSI_SANITY:?}"
export DM_DISABLE_UDEV=1  # for the lvm commands this script runs itself

disk=$(vm_disk lvm1)
pool="backend=lvm,vg=nv,type=thin,thinpool=tp,thinpool-size=80%,devices=$disk"
for access in mount block; do
  vm_step "csi-sanity, pool $pool, $access access, 64 MiB volumes"
  rc=0
  "$csi_test" "$NODEVOLD" "$pool" "$access" $((64 * 1024 * 1024)) || rc=$?
  ((rc == 0)) || vm_fail "csi_sanity_test.sh ($access) exited $rc"
done

vm_step "the VG holds the thin pool and no volume's LV"
lvs=$(lvm lvs --noheadings -o lv_name,lv_attr,lv_size,lv_tags nv | sed 's/^ *//')
vm_log "$lvs"
grep -q '^tp ' <<<"$lvs" || vm_fail "no thin pool tp in VG nv"
left=$(grep -v -e '^tp ' -e '^\[' <<<"$lvs" || true)
[[ -z $left ]] || vm_fail "LVs left after csi-sanity: $left"
vm_step "ok"
