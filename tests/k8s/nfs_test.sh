#!/usr/bin/env bash
# Under the real kubelet in a VM (cluster-up --node-in-vm --vm-pools nfs):
# a nodevol NFS volume (a subdirectory of the guest's own nfsd export,
# tests/vm/nfs_lib.sh) in real pods. A static PV (flexVolume, volume: nv1)
# bound to a PVC: a pod writes a file, which lands on the server; deleted
# and recreated, the new pod reads it. Checked in the guest each time:
# kubelet's target is an NFS mount of the volume's directory, nodevold's one
# staging mount of the export is there while published and gone after the
# last pod, kubelet's target and pod directory are gone.
K8S_TEST=nfs
source "$(dirname "$0")/vm-lib.sh"
dir=default-c-nv1-pv-nv1  # the pool's default pathPattern: ${namespace}-${pvcName}-${pvName}

# nfs_target DIR: in the guest, DIR is a read-write NFS mount of the
# volume's directory on the export.
nfs_target() {
  node_sh "m=\$(mnt '$1') || { echo '$1: not a mount'; exit 1; }
    echo '$1:' \$m
    set -- \$m
    [[ \$1 == 127.0.0.1:/$dir && \$2 == nfs4 && ,\$3, == *,rw,* ]]"
}
# The NFS mounts below nodevold's state dir (staging and per-volume binds).
nfs_mounts='findmnt -rn -t nfs,nfs4 -o TARGET,SOURCE | awk -v s="$NV_STATE/" "index(\$1, s) == 1"'

step "volume nv1 in pool nfs, PV pv-nv1, PVC c-nv1"
static_pv_pvc nv1 nfs 10Mi --param nodevol.io/pvc-namespace=default \
  --param nodevol.io/pvc-name=c-nv1 --param nodevol.io/pv-name=pv-nv1
node_sh "[[ -d \$NFS_EXPORT/$dir ]]" || fail "no directory $dir on the server"
# (a capacity poll may mount the export for a moment)
node_wait 30 "no NFS mount before any pod" "[[ -z \$($nfs_mounts) ]]"

step "pod app writes /data/f"
pod_apply app 'echo hello-nfs > /data/f && sync && echo write-ok; sleep 3600' \
  "persistentVolumeClaim: {claimName: c-nv1}"
uid1=$(pod_running app)
wait_log app write-ok
nfs_target "$(target "$uid1" pv-nv1)" >&2 || fail "kubelet's target is not the NFS directory"
[[ $(node_sh "cat \$NFS_EXPORT/$dir/f") == hello-nfs ]] || fail "the file is not on the server"
mounts=$(node_sh "$nfs_mounts")
echo "$mounts" >&2
[[ $(grep -c "nfs/[0-9a-f]\{16\} " <<<"$mounts") == 1 ]] || fail "want one staging mount of the export: $mounts"
node_ctl volume list | grep -q nv1 || fail "nodevolctl volume list lacks nv1"

step "app deleted: target unmounted, pod directory removed, no NFS mount left"
pod_delete app
gone_after_pod "$uid1" pv-nv1
node_wait 30 "NFS unmounted after the last publication" "[[ -z \$($nfs_mounts) ]]"

step "app recreated: the file is still there"
pod_apply app 'cat /data/f; sleep 3600' "persistentVolumeClaim: {claimName: c-nv1}"
uid2=$(pod_running app)
[[ $uid2 != "$uid1" ]] || fail "the recreated pod has the old UID"
wait_log app hello-nfs
nfs_target "$(target "$uid2" pv-nv1)" >&2 || fail "the new pod's target is not the NFS directory"
pod_delete app
gone_after_pod "$uid2" pv-nv1
node_wait 30 "NFS unmounted after the last publication" "[[ -z \$($nfs_mounts) ]]"
node_sh "[[ \$(cat \$NFS_EXPORT/$dir/f) == hello-nfs ]]" || fail "the file left the server"
step "PASS"
