#!/usr/bin/env bash
# Under the real kubelet in a VM (cluster-up --node-in-vm --vm-pools nfs):
# a nodevol NFS volume (a subdirectory of the guest's own nfsd export,
# tests/vm/nfs_lib.sh) in real pods. A static PV (flexVolume, volume: nv1)
# bound to a PVC: a pod writes a file, which lands on the server; deleted
# and recreated, the new pod reads it. Checked in the guest each time:
# kubelet's target is an NFS mount of the volume's directory, nodevold's one
# staging mount of the export is there while published and gone after the
# last pod, kubelet's target and pod directory are gone. Then a volume made
# by a second nodevold (another node of the same pool) is mounted here by
# kubelet's pod, and deleted from here with that nodevold stopped.
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

# Issue 26 item 5: an NFS volume is one directory for every node serving
# the pool. A second nodevold in the guest stands for another node (own
# socket, state and pods root, the same pool): it makes nv2; the PV names
# the pool as the provisioner's do, and kubelet's pod here mounts it
# through this node's nodevold, which finds the record on the export.
b=/run/nodevol-b
step "nv2 made by another node's nodevold; a pod here mounts it"
node_sh "mkdir -p $b/pods && : >$b/conf
  setsid \"\$NODEVOLD\" --config=$b/conf --socket=$b/sock --state-dir=$b/state --pods-root=$b/pods \\
    --node-name=node-b --metrics-address=off --log-target=stderr \\
    --pool=name=nfs,backend=nfs,server=127.0.0.1,share=/ </dev/null >/vm/out/nodevold-b.log 2>&1 &
  echo \$! >$b/pid
  for _ in \$(seq 300); do \"\$NODEVOLCTL\" --socket $b/sock info >/dev/null 2>&1 && exit 0; sleep 0.1; done
  exit 1" || fail "the second nodevold did not start: $(tail -5 "$K8S_VM_SHARE/out/nodevold-b.log")"
node_sh "\"\$NODEVOLCTL\" --socket $b/sock volume create nv2 --pool nfs --size 10Mi \\
  --param nodevol.io/pvc-namespace=default --param nodevol.io/pvc-name=c-nv2 --param nodevol.io/pv-name=pv-nv2" >/dev/null ||
  fail "volume create nv2 on node b"
! node_ctl volume get nv2 >/dev/null 2>&1 || fail "this node knows nv2 before any pod"
k apply -f - >/dev/null <<YAML || fail "apply PV/PVC nv2"
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-nv2}
spec:
  capacity: {storage: 10Mi}
  accessModes: [ReadWriteMany]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  flexVolume: {driver: nodevol.io/volume, options: {volume: nv2, pool: nfs}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: c-nv2}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: ""
  volumeName: pv-nv2
  resources: {requests: {storage: 10Mi}}
YAML
k wait --for=jsonpath='{.status.phase}'=Bound pvc/c-nv2 --timeout=60s >/dev/null || fail "PVC c-nv2 not Bound"
dir2=default-c-nv2-pv-nv2
pod_apply app2 'echo from-here > /data/g && sync && echo write-ok; sleep 3600' "persistentVolumeClaim: {claimName: c-nv2}"
uid3=$(pod_running app2)
wait_log app2 write-ok
[[ $(node_sh "cat \$NFS_EXPORT/$dir2/g") == from-here ]] || fail "the pod's file is not in nv2's directory"
node_sh "grep -q '\"shared_copy\": *true' \$NV_STATE/volumes/nv2.json" || fail "this node publishes nv2 without its copy"
pod_delete app2
gone_after_pod "$uid3" pv-nv2
node_wait 30 "this node's copy of nv2 dropped after its last pod" "[[ ! -e \$NV_STATE/volumes/nv2.json ]]"
step "node b stopped: this node deletes nv2 with the pool named"
node_sh "kill \$(cat $b/pid)"
node_ctl volume delete nv2 --shared-pool nfs >/dev/null || fail "delete nv2 from this node"
node_sh "[[ ! -e \$NFS_EXPORT/$dir2 && ! -e \$NFS_EXPORT/.nodevol/volumes/nv2.json ]]" ||
  fail "nv2's directory or record stayed on the server"
step "PASS"
