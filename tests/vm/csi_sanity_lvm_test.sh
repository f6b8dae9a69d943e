#!/bin/bash
# Runs inside a vm-run guest (vm_csi_sanity_lvm, through csi_sanity_lvm_run):
# tests/csi/csi_sanity_test.sh against a nodevold whose pool is thin LVM on
# the scratch disk "lvm1" (>= 512M), VG and thin pool built by nodevold,
# ext4 (the pool default: xfs cannot be made below 300 MiB), 64 MiB
# volumes, mount access, then raw block access (the device bound onto a
# file at kubelet's block publish path). Then no LV of a volume may be
# left in the VG.
# With "thick-nfs" instead (vm_csi_sanity_thick_nfs): a thick LVM pool on
# the same disk, mount access, then an NFS pool on the guest's own nfsd
# (a tmpfs export), mount access: the pools that take no snapshots.
#   csi_sanity_lvm_test.sh CSI_SANITY_TEST [thin|thick-nfs]
# Needs NODEVOLD and CSI_SANITY in the environment.
source "$VM_LIB"
csi_test=${1:?usage: csi_sanity_lvm_test.sh CSI_SANITY_TEST [thin|thick-nfs]}
kinds=${2:-thin}
: "${NODEVOLD:?}" "${CSI_SANITY:?}"
export DM_DISABLE_UDEV=1  # for the lvm commands this script runs itself

# sanity POOL ACCESS: csi_sanity_test.sh on that pool and access.
sanity() {
  vm_step "csi-sanity, pool $1, $2 access, 64 MiB volumes"
  local rc=0
  "$csi_test" "$NODEVOLD" "$1" "$2" $((64 * 1024 * 1024)) || rc=$?
  ((rc == 0)) || vm_fail "csi_sanity_test.sh ($1, $2) exited $rc"
}
disk=$(vm_disk lvm1)
if [[ $kinds == thick-nfs ]]; then
  sanity "backend=lvm,vg=nv,type=thick,devices=$disk" mount
  source "$(dirname "$0")/nfs_lib.sh"
  nfs_server_start 512m
  # Each volume's subdirectory by its own name: csi-sanity passes no claim.
  export CSI_SANITY_PARAMS='pathPattern: "sanity-${pvName}"'
  sanity "backend=nfs,server=127.0.0.1,share=/,on-delete=delete" mount
  unset CSI_SANITY_PARAMS
  left=$(nfs_export_leftovers)
  [[ -z $left ]] || vm_fail "left on the NFS export after csi-sanity: $left"
  tp="^$"  # no thin pool in this VG
else
  sanity "backend=lvm,vg=nv,type=thin,thinpool=tp,thinpool-size=80%,devices=$disk" mount
  sanity "backend=lvm,vg=nv,type=thin,thinpool=tp,thinpool-size=80%,devices=$disk" block
  tp="^tp "
fi

vm_step "the VG holds no volume's LV"
lvs=$(lvm lvs --noheadings -o lv_name,lv_attr,lv_size,lv_tags nv | sed 's/^ *//')
vm_log "$lvs"
[[ $kinds != thin ]] || grep -q '^tp ' <<<"$lvs" || vm_fail "no thin pool tp in VG nv"
left=$(grep -v -e "$tp" -e '^\[' -e '^$' <<<"$lvs" || true)
[[ -z $left ]] || vm_fail "LVs left after csi-sanity: $left"
vm_step "ok"
