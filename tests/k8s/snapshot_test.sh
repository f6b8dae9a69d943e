#!/usr/bin/env bash
# Snapshots, restores and clones through the VolumeSnapshot API, under the
# real kubelet with the node in a VM (cluster-up --node-in-vm --vm-pools
# lvm: thin pool "thin" on VG nv), the upstream snapshot CRDs and
# snapshot-controller (tests/k8s/build-snapshotter) and nodevol-provisioner
# playing the CSI snapshotter's part over mutual TLS (docs/snapshots.md).
#  1. A pod writes v1 to a claim; VolumeSnapshot snap1 becomes ready, its
#     content's handle is <node>/snapshot-<uid>, a thin snapshot LV holds
#     it in the guest; the pod then writes v2.
#  2. A claim restored from snap1 (bigger than the source) shows v1 and has
#     its size; a clone of the source claim shows v2.
#  3. Bad input, nothing made: a restore smaller than the snapshot (a
#     ProvisioningFailed event naming the size), a snapshot of a thick-LVM
#     claim (the content's error says the pool takes none), a VolumeSnapshot
#     of an unknown class (not ready, no content of ours). (Another driver's
#     content is left alone: provisioner/snapshots/content_test.cc.) A dir-pool claim's
#     snapshot is a copy in the pool's .snapshots, and restores what it held.
#  4. The source claim and its LV deleted: snap1 still restores v1.
#  5. Deletion policies: Delete removes the snapshot LV with the
#     VolumeSnapshot; Retain keeps it when both the VolumeSnapshot and its
#     content go, and a pre-provisioned content naming it restores again.
#  6. The provisioner's snapshot metrics count what it did; it ran with
#     deploy/base's RBAC only and was never refused.
K8S_TEST=snapshot
source "$(dirname "$0")/vm-lib.sh"
: "${NODEVOL_PROVISIONER:?}"
deploy=$(cd "$(dirname "$0")/../../deploy" && pwd)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done' EXIT
prov_fail() {
  echo "---- provisioner log (tail)" >&2; tail -40 "$K8S_WORK/logs/provisioner.log" >&2
  echo "---- snapshot-controller log (tail)" >&2; tail -20 "$K8S_WORK/logs/snapshot-controller.log" >&2
  fail "$@"
}
# lvs_has NAME: the guest's VG nv has LV NAME (lvs itself must work).
lvs_has() { node_sh "l=\$(lvm lvs --noheadings -o lv_name nv) && grep -qx '  $1' <<<\"\$l\""; }

step "snapshot CRDs and snapshot-controller; CSIDriver; provisioner (deploy/base RBAC) over TLS to the VM's nodevold"
snapshot_api_up
pids+=("$SNAPSHOT_CONTROLLER_PID")
k apply -f "$deploy/base/csidriver.yaml" >/dev/null || fail "apply the CSIDriver"
k label node "$K8S_NODE" nodevol.io/node=true >/dev/null
# With deploy/base's RBAC only: a verb the snapshot part lacks is a
# "Forbidden" in the log (checked at the end).
deploy_base_apply "$deploy"
sa_kubeconfig "$K8S_WORK/sa.kubeconfig"
tls=$K8S_WORK/tls
nsenter --net="/run/netns/$K8S_NETNS" "$NODEVOL_PROVISIONER" --kubeconfig="$K8S_WORK/sa.kubeconfig" \
  --tls-ca="$tls/ca.crt" --tls-cert="$tls/provisioner.crt" --tls-key="$tls/provisioner.key" \
  --leader-elect=false --log-level=debug >"$K8S_WORK/logs/provisioner.log" 2>&1 &
pids+=("$!")
for _ in $(seq 120); do grep -q "snapshots: serving VolumeSnapshotContents" "$K8S_WORK/logs/provisioner.log" && break; sleep 0.5; done
grep -q "snapshots: serving VolumeSnapshotContents" "$K8S_WORK/logs/provisioner.log" || prov_fail "the provisioner never served snapshots"

k apply -f - >/dev/null <<YAML || fail "apply classes"
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: nv-thin}
provisioner: nodevol.io
parameters: {pool: thin, volumeSource: csi}
reclaimPolicy: Delete
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: nv-dir}
provisioner: nodevol.io
parameters: {pool: default, volumeSource: csi}
reclaimPolicy: Delete
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: nv-thick}
provisioner: nodevol.io
parameters: {pool: lvm, volumeSource: csi}
reclaimPolicy: Delete
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotClass
metadata: {name: nv-snap}
driver: nodevol.io
deletionPolicy: Delete
---
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotClass
metadata: {name: nv-retain}
driver: nodevol.io
deletionPolicy: Retain
YAML

# claim NAME CLASS SIZE [DATASOURCE-YAML]
claim() {
  k apply -f - >/dev/null <<YAML || fail "apply claim $1"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $1}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: $2
  resources: {requests: {storage: $3}}
  ${4:+dataSourceRef: $4}
YAML
}
# snapshot NAME CLAIM [CLASS]
snapshot() {
  k apply -f - >/dev/null <<YAML || fail "apply VolumeSnapshot $1"
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {name: $1}
spec:
  volumeSnapshotClassName: ${3:-nv-snap}
  source: {persistentVolumeClaimName: $2}
YAML
}
ready() { k wait --for=jsonpath='{.status.readyToUse}'=true "volumesnapshot/$1" --timeout="$(scaled "${2:-120}")s" >/dev/null ||
  prov_fail "VolumeSnapshot $1 not ready: $(k get volumesnapshot "$1" -o jsonpath='{.status}')"; }
from_snap() { echo "{apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: $1}"; }
# reads POD CLAIM: a pod printing /data/f and the volume's size in KiB, then sleeping.
reads() { pod_apply "$1" "cat /data/f; df -kP /data | tail -1 | awk '{print \$2}'; sleep 3600" \
  "persistentVolumeClaim: {claimName: $2}"; }

step "1. writer: v1 into claim src (thin, 64Mi); snap1; then v2"
claim src nv-thin 64Mi
pod_apply writer 'echo v1 > /data/f && sync && echo wrote; sleep 3600' "persistentVolumeClaim: {claimName: src}"
pod_running writer >/dev/null
wait_log writer wrote
src_pv=$(k get pvc src -o jsonpath='{.spec.volumeName}')
snapshot snap1 src
ready snap1
content=$(k get volumesnapshot snap1 -o jsonpath='{.status.boundVolumeSnapshotContentName}')
uid=$(k get volumesnapshot snap1 -o jsonpath='{.metadata.uid}')
handle=$(k get volumesnapshotcontent "$content" -o jsonpath='{.status.snapshotHandle}')
[[ $handle == "$K8S_NODE/snapshot-$uid" ]] || fail "content $content has handle '$handle', not $K8S_NODE/snapshot-$uid"
[[ $(k get volumesnapshot snap1 -o jsonpath='{.status.restoreSize}') == 64Mi ]] ||
  fail "snap1's restoreSize is $(k get volumesnapshot snap1 -o jsonpath='{.status.restoreSize}'), not 64Mi"
lvs_has "nvs-snapshot-$uid" || fail "no thin snapshot LV nvs-snapshot-$uid: $(node_sh lvs_nv)"
k exec writer -- sh -c 'echo v2 > /data/f && sync' || fail "writing v2"

step "2. restore r1 (96Mi) from snap1 shows v1 at its own size; clone c1 of src shows v2"
claim r1 nv-thin 96Mi "$(from_snap snap1)"
claim c1 nv-thin 64Mi "{kind: PersistentVolumeClaim, name: src}"
reads read-r1 r1
reads read-c1 c1
pod_running read-r1 >/dev/null
pod_running read-c1 >/dev/null
wait_log read-r1 v1
wait_log read-c1 v2
kib=$(k logs read-r1 | sed -n 2p)
((kib > 80 * 1024)) || fail "the restored filesystem is $kib KiB, not grown to about 96Mi"
r1_pv=$(k get pvc r1 -o jsonpath='{.spec.volumeName}')
[[ $(k get pv "$r1_pv" -o jsonpath='{.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]}') == "$K8S_NODE" ]] ||
  fail "the restored PV is not pinned to the snapshot's node"

step "3. bad input: too small a restore, a thick-pool snapshot, an unknown class: clear errors, nothing made"
claim small nv-thin 32Mi "$(from_snap snap1)"
pod_apply read-small 'sleep 3600' "persistentVolumeClaim: {claimName: small}"
wait_event small ProvisioningFailed "needs at least 64.0MiB" >/dev/null
[[ $(k get pvc small -o jsonpath='{.status.phase}') == Pending ]] || fail "claim small is not Pending"
# A pending claim keeps its source VolumeSnapshot (the snapshot-controller's
# source protection): both go, so snap1 can be deleted below.
k delete pod read-small --wait=false >/dev/null
k delete pvc small --wait=false >/dev/null
claim onethick nv-thick 16Mi
pod_apply thickpod 'sleep 3600' "persistentVolumeClaim: {claimName: onethick}"
pod_running thickpod >/dev/null
snapshot thicksnap onethick
msg=
for _ in $(seq 120); do
  msg=$(k get volumesnapshot thicksnap -o jsonpath='{.status.error.message}' 2>/dev/null) || true
  [[ -n $msg ]] && break; sleep 0.5
done
[[ $msg == *"does not take snapshots"* ]] || prov_fail "thicksnap's error is '$msg'"
[[ $(k get volumesnapshot thicksnap -o jsonpath='{.status.readyToUse}') != true ]] || fail "thicksnap is ready"
snapshot nosuch src no-such-class
# Not a fixed sleep: the snapshot-controller's refusal, then nothing made.
msg=
for _ in $(seq 120); do
  msg=$(k get volumesnapshot nosuch -o jsonpath='{.status.error.message}' 2>/dev/null) || true
  [[ -n $msg ]] && break; sleep 0.5
done
[[ $msg == *no-such-class* ]] || prov_fail "nosuch's error is '$msg', naming no class no-such-class"
[[ $(k get volumesnapshot nosuch -o jsonpath='{.status.readyToUse}') != true ]] || fail "nosuch is ready"
[[ -z $(k get volumesnapshot nosuch -o jsonpath='{.status.boundVolumeSnapshotContentName}') ]] || fail "nosuch got a content"
n=$(node_sh "lvm lvs --noheadings -o lv_name nv | grep -c nvs- || true")
((n == 1)) || fail "$n snapshot LVs where only snap1's should be: $(node_sh lvs_nv)"

step "3b. a dir-pool claim: its snapshot is a copy, a restore holds what it held"
claim onedir nv-dir 16Mi
pod_apply dirpod 'echo d1 >/data/f && echo written; sleep 3600' "persistentVolumeClaim: {claimName: onedir}"
wait_log dirpod written
snapshot dirsnap onedir
ready dirsnap
dir_uid=$(k get volumesnapshot dirsnap -o jsonpath='{.metadata.uid}')
node_sh "test -f /var/lib/nvk8s/pool/.snapshots/snapshot-$dir_uid/f" ||
  fail "no copy of dirsnap in the dir pool's .snapshots"
claim rdir nv-dir 16Mi "$(from_snap dirsnap)"
reads read-rdir rdir
pod_running read-rdir >/dev/null
wait_log read-rdir d1

step "4. src and its LV deleted: snap1 still restores v1"
pod_delete writer
k delete pvc src c1 --wait=false >/dev/null
pod_delete read-c1
for _ in $(seq 120); do lvs_has "nv-$src_pv" || break; sleep 0.5; done
! lvs_has "nv-$src_pv" || fail "the source LV nv-$src_pv is still there"
claim r2 nv-thin 64Mi "$(from_snap snap1)"
reads read-r2 r2
pod_running read-r2 >/dev/null
wait_log read-r2 v1

step "5. deletion policies: Delete takes the LV; Retain keeps it, and a static content restores it"
snapshot keep r2 nv-retain
ready keep
keep_uid=$(k get volumesnapshot keep -o jsonpath='{.metadata.uid}')
keep_content=$(k get volumesnapshot keep -o jsonpath='{.status.boundVolumeSnapshotContentName}')
k delete volumesnapshot snap1 --timeout=120s >/dev/null || prov_fail "deleting snap1"
for _ in $(seq 120); do lvs_has "nvs-snapshot-$uid" || break; sleep 0.5; done
! lvs_has "nvs-snapshot-$uid" || prov_fail "snap1's LV is still there after its VolumeSnapshot went (policy Delete)"
k get volumesnapshotcontent "$content" >/dev/null 2>&1 && fail "snap1's content $content is still there"
k delete volumesnapshot keep --timeout=120s >/dev/null || prov_fail "deleting keep"
k get volumesnapshotcontent "$keep_content" >/dev/null 2>&1 || fail "Retain: the content went with its VolumeSnapshot"
k delete volumesnapshotcontent "$keep_content" --timeout=120s >/dev/null || prov_fail "deleting content $keep_content"
lvs_has "nvs-snapshot-$keep_uid" || fail "Retain: the snapshot LV went"
k apply -f - >/dev/null <<YAML || fail "apply the static content and its VolumeSnapshot"
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotContent
metadata: {name: kept-content}
spec:
  driver: nodevol.io
  deletionPolicy: Delete
  source: {snapshotHandle: "$K8S_NODE/snapshot-$keep_uid"}
  volumeSnapshotRef: {name: kept, namespace: default}
---
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {name: kept}
spec:
  source: {volumeSnapshotContentName: kept-content}
YAML
ready kept
claim r3 nv-thin 64Mi "$(from_snap kept)"
reads read-r3 r3
pod_running read-r3 >/dev/null
wait_log read-r3 v1

step "6. metrics: snapshot operations counted"
m=$(ip netns exec "$K8S_NETNS" curl -sf http://127.0.0.1:9810/metrics) || fail "/metrics does not answer"
creates=$(sed -n 's/^nodevol_provisioner_snapshot_operations_total{operation="create",result="success"} //p' <<<"$m")
deletes=$(sed -n 's/^nodevol_provisioner_snapshot_operations_total{operation="delete",result="success"} //p' <<<"$m")
fails=$(sed -n 's/^nodevol_provisioner_snapshot_operations_total{operation="create",result="failure"} //p' <<<"$m")
((${creates:-0} >= 2 && ${deletes:-0} >= 1 && ${fails:-0} >= 1)) ||
  fail "snapshot metrics: $creates creates, $deletes deletes, $fails failed creates"
controller_provision=$(grep -c 'source="VolumeSnapshot"' <<<"$m" || true)
((controller_provision > 0)) || fail "no provisioning counted with source VolumeSnapshot"

step "cleanup: pods and claims go, every LV of theirs with them"
# At once: each deletion waits for the emulated node's unmounts.
k delete pod read-r1 read-r2 read-r3 dirpod thickpod read-rdir --wait=true --timeout=300s >/dev/null ||
  fail "deleting the pods"
k delete volumesnapshot --all --timeout=120s >/dev/null || prov_fail "deleting the VolumeSnapshots"
k delete pvc --all --wait=true --timeout=120s >/dev/null || fail "deleting the claims"
for _ in $(seq 120); do [[ -z $(k get pv -o name) ]] && break; sleep 0.5; done
[[ -z $(k get pv -o name) ]] || prov_fail "PVs left: $(k get pv -o name)"
node_sh "l=\$(lvm lvs --noheadings -o lv_name nv) && ! grep -q 'nv-pvc-\|nvs-' <<<\"\$l\"" ||
  fail "LVs left: $(node_sh lvs_nv)"
left=$(node_sh "ls -A /var/lib/nvk8s/pool /var/lib/nvk8s/pool/.snapshots 2>/dev/null | grep -v -e '^/' -e '^\.snapshots\$' -e '^\$' || true")
[[ -z $left ]] || fail "left in the dir pool: $left"
forbidden=$(grep -i forbidden "$K8S_WORK/logs/provisioner.log" | head -5 || true)
[[ -z $forbidden ]] || fail "deploy/base's RBAC refused the provisioner: $forbidden"
step "ok"
