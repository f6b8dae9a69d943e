#!/usr/bin/env bash
# Under the real kubelet in a VM (cluster-up --node-in-vm --vm-pools lvm):
# nodevol LVM volumes (thick VG "nv" on the guest's disk, ext4) in real pods.
# A static PV (flexVolume, volume: lv1) bound to a PVC: a pod writes a file;
# deleted and recreated, the new pod reads it. Checked in the guest each
# time: kubelet's target is a bind of the LV, the staging mount is there
# while published and gone after the last pod, kubelet's target and pod
# directory are gone. Then an inline ephemeral volume on the LVM pool: its
# LV exists while the pod runs and is gone after it is deleted.
K8S_TEST=lvm
source "$(dirname "$0")/vm-lib.sh"
staging=/var/lib/nvk8s/nodevol/staging/lvm/lv1  # <state dir>/staging/<pool>/<volume>

# lv_mounted DIR LV: in the guest, DIR is a read-write ext4 mount of /dev/nv/LV.
lv_mounted() { node_sh "is_lv_mount '$1' '$2'"; }

step "volume lv1 (64Mi) in pool lvm, PV pv-lv1, PVC c-lv1"
static_pv_pvc lv1 lvm 64Mi --param nodevol.io/pvc-namespace=default
node_sh 'lvs_nv | grep -qx nv-lv1' || fail "no LV nv-lv1: $(node_sh lvs_nv)"

step "pod app writes /data/f"
pod_apply app 'echo hello-lvm > /data/f && sync && echo write-ok; sleep 3600' \
  "persistentVolumeClaim: {claimName: c-lv1}"
uid1=$(pod_running app)
wait_log app write-ok
t1=$(target "$uid1" pv-lv1)
lv_mounted "$t1" nv-lv1 >&2 || fail "kubelet's target is not the LV"
lv_mounted "$staging" nv-lv1 >&2 || fail "no staging mount while published"
[[ $(node_sh "cat '$staging/f'") == hello-lvm ]] || fail "the file is not on the LV"
node_ctl volume list | grep -q lv1 || fail "nodevolctl volume list lacks lv1"

step "app deleted: target unmounted, pod directory removed, staging unmounted"
pod_delete app
gone_after_pod "$uid1" pv-lv1
node_wait 30 "staging mount gone after the last publication" "m=\$(cat /proc/self/mountinfo) && ! grep -qF ' $staging ' <<<\"\$m\""
node_sh 'lvs_nv | grep -qx nv-lv1' || fail "the LV went with the pod"

step "app recreated: the file is still there"
pod_apply app 'cat /data/f; sleep 3600' "persistentVolumeClaim: {claimName: c-lv1}"
uid2=$(pod_running app)
[[ $uid2 != "$uid1" ]] || fail "the recreated pod has the old UID"
wait_log app hello-lvm
lv_mounted "$(target "$uid2" pv-lv1)" nv-lv1 >&2 || fail "the new pod's target is not the LV"
lv_mounted "$staging" nv-lv1 >&2 || fail "no staging mount with the second publication"
pod_delete app
gone_after_pod "$uid2" pv-lv1
node_wait 30 "staging mount gone after the last publication" "m=\$(cat /proc/self/mountinfo) && ! grep -qF ' $staging ' <<<\"\$m\""

step "inline ephemeral volume on pool lvm (32Mi)"
pod_apply inl 'echo x > /data/f && echo write-ok; sleep 3600' \
  "flexVolume: {driver: nodevol.io/volume, options: {pool: lvm, size: 32Mi}}"
uid3=$(pod_running inl)
wait_log inl write-ok
name=ephemeral-$uid3-data
node_ctl volume get "$name" >/dev/null || fail "no volume $name while the pod runs: $(node_ctl volume list)"
node_sh "lvs_nv | grep -qx 'nv-$name'" || fail "no LV nv-$name: $(node_sh lvs_nv)"
lv_mounted "$(target "$uid3" data)" "nv-$name" >&2 || fail "the inline volume's target is not its LV"
pod_delete inl
gone_after_pod "$uid3" data
# Each negative check looks at what its tool printed and fails when the
# tool itself fails (a daemon that does not answer lists nothing either).
node_wait 60 "volume $name deleted" "l=\$(ctl volume list) && ! grep -q '$name' <<<\"\$l\""
node_sh "l=\$(lvm lvs --noheadings -o lv_name nv) && ! grep -q '$name' <<<\"\$l\"" || fail "LV nv-$name still there, or lvs failed: $(node_sh lvs_nv)"
node_sh "m=\$(cat /proc/self/mountinfo) && ! grep -qF ' /var/lib/nvk8s/nodevol/staging/lvm/$name ' <<<\"\$m\"" || fail "staging mount of $name left"
step "PASS"
