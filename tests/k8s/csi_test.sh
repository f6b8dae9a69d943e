#!/usr/bin/env bash
# Under the real control plane and kubelet, in a cluster without FlexVolume
# (cluster-up --no-flex): nodevol through its CSI front door only. nodevold
# registers itself with kubelet (no sidecar); nodevol-provisioner makes
# spec.csi PVs (the default volumeSource). Checked:
#  - registration: CSINode lists nodevol.io with topology.nodevol.io/node,
#    and the Node carries that label;
#  - a claim of a csi class: PV with spec.csi (driver, volumeHandle, pool),
#    a pod writes at kubelet's .../kubernetes.io~csi/<pv>/mount, no
#    VolumeAttachment is made; a second pod, after the first is gone, reads;
#  - read-only claim: the pod's mount is ro; fsGroup: the volume's group;
#  - online expansion: claim grown while its pod runs -> PV and claim
#    status capacity, no Resizing condition left;
#  - an inline CSI volume: made for its pod, gone with it;
#  - kubelet restarted: the running pod keeps its mount, the driver is
#    registered again, a new pod mounts;
#  - nodevold killed -9 and started again: kubelet re-dials, a new pod
#    mounts; nodevold stopped when a pod starts: an event, and the pod
#    runs once it is back; 30 pods with a claim each at once; all pods
#    deleted: no mount left under the pods root.
# Needs NODEVOL_PROVISIONER besides what lib.sh needs.
K8S_TEST=csi
source "$(dirname "$0")/lib.sh"
: "${NODEVOL_PROVISIONER:?}"
deploy=$(cd "$(dirname "$0")/../../deploy" && pwd)
tls=$K8S_WORK/tls
make_tls "$tls" "$K8S_NODE"
node_ip=$(k get node "$K8S_NODE" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
[[ -z $(ls -A "$K8S_WORK/volumeplugins" 2>/dev/null) ]] || fail "a FlexVolume driver is installed; run under cluster-up --no-flex"
csi_mounts() { grep -c " $K8S_PODS_ROOT/[^ ]*/volumes/kubernetes.io~csi/" /proc/self/mountinfo || true; }

step "nodevold (dir pool, inline volumes on) registers nodevol.io with kubelet"
K8S_POOL_EXTRA=",inline=on,inline-max-size=64Mi"
nodevold_args=(--tls-listen="$node_ip:9809" --tls-ca="$tls/ca.crt" --tls-cert="$tls/node.crt" --tls-key="$tls/node.key")
nodevold_start "${nodevold_args[@]}"
keys=
for _ in $(seq 60); do
  keys=$(k get csinode "$K8S_NODE" -o jsonpath='{.spec.drivers[?(@.name=="nodevol.io")].topologyKeys}' 2>/dev/null) || true
  [[ -n $keys ]] && break; sleep 0.5
done
[[ $keys == *topology.nodevol.io/node* ]] || fail "CSINode $K8S_NODE lists no nodevol.io with its topology key (got '$keys')"
[[ $(k get node "$K8S_NODE" -o jsonpath='{.metadata.labels.topology\.nodevol\.io/node}') == "$K8S_NODE" ]] \
  || fail "Node $K8S_NODE has no topology.nodevol.io/node label"
for _ in $(seq 20); do grep -q "csi: kubelet registered driver nodevol.io" "$K8S_WORK/logs/nodevold.log" && break; sleep 0.5; done
grep -q "csi: kubelet registered driver nodevol.io" "$K8S_WORK/logs/nodevold.log" || fail "kubelet never reported the registration"

step "CSIDriver (deploy/base) and the provisioner"
k apply -f "$deploy/base/csidriver.yaml" >/dev/null || fail "apply the CSIDriver"
k label node "$K8S_NODE" nodevol.io/node=true >/dev/null
nsenter --net="/run/netns/$K8S_NETNS" "$NODEVOL_PROVISIONER" --kubeconfig="$K8S_WORK/admin.kubeconfig" \
  --tls-ca="$tls/ca.crt" --tls-cert="$tls/provisioner.crt" --tls-key="$tls/provisioner.key" \
  --log-level=debug >"$K8S_WORK/logs/provisioner.log" 2>&1 &
CLEANUP_PIDS+=("$!")
prov_fail() { echo "---- provisioner log (tail)" >&2; tail -30 "$K8S_WORK/logs/provisioner.log" >&2; fail "$@"; }
storage_class nv-csi binding=WaitForFirstConsumer expand=true pool=default volumeSource=csi
# No volumeSource at all: the provisioner's default.
k apply -f - >/dev/null <<YAML || fail "apply class nv-default"
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: nv-default}
provisioner: nodevol.io
parameters: {pool: default}
volumeBindingMode: Immediate
YAML

step "a claim's pod writes through CSI; no VolumeAttachment"
claim data nv-csi 64Mi
claim_pod writer data 'echo via-csi > /data/f && sleep 3600' | k apply -f - >/dev/null
k wait --for=condition=Ready pod/writer --timeout=180s >/dev/null || prov_fail "pod writer not Ready"
pv=$(k get pvc data -o jsonpath='{.spec.volumeName}')
[[ $(k get pv "$pv" -o jsonpath='{.spec.csi.driver}/{.spec.csi.volumeHandle}/{.spec.csi.volumeAttributes.pool}') == "nodevol.io/$pv/default" ]] \
  || fail "PV $pv has no spec.csi for nodevol.io: $(k get pv "$pv" -o jsonpath='{.spec}')"
uid=$(k get pod writer -o jsonpath='{.metadata.uid}')
target=$K8S_PODS_ROOT/$uid/volumes/kubernetes.io~csi/$pv/mount
findmnt -n "$target" >/dev/null || fail "nothing mounted at kubelet's CSI target $target"
[[ $(k exec writer -- cat /data/f) == via-csi ]] || fail "the pod cannot read what it wrote"
[[ -z $(k get volumeattachments -o name) ]] || fail "VolumeAttachments made: $(k get volumeattachments -o name)"
grep -q "csi.NodePublishVolume volume=$pv .*outcome=OK" "$K8S_WORK/logs/nodevold.log" || fail "nodevold logged no CSI publish of $pv"
k get pvc data -o jsonpath='{.status.capacity.storage}' | grep -qx 64Mi || fail "claim capacity"

step "online expansion: the claim grows while its pod runs"
k patch pvc data --type=merge -p '{"spec":{"resources":{"requests":{"storage":"96Mi"}}}}' >/dev/null || fail "patch claim data"
for _ in $(seq 120); do [[ $(k get pvc data -o jsonpath='{.status.capacity.storage}') == 96Mi ]] && break; sleep 0.5; done
[[ $(k get pvc data -o jsonpath='{.status.capacity.storage}') == 96Mi ]] \
  || prov_fail "claim status capacity $(k get pvc data -o jsonpath='{.status.capacity.storage}'), not 96Mi"
[[ $(k get pv "$pv" -o jsonpath='{.spec.capacity.storage}') == 96Mi ]] || fail "PV capacity not 96Mi"
ctl -o json volume get "$pv" | grep -q '"size_bytes": "100663296"' || fail "nodevold's volume not 96Mi"
# Kubernetes' own conditions (1.37 adds Unused) may be there; the resize's not.
conds=$(k get pvc data -o jsonpath='{.status.conditions[*].type}')
[[ " $conds " != *" Resizing "* && " $conds " != *" FileSystemResizePending "* ]] || fail "resize conditions left on the claim: $conds"
[[ -z $(k get pvc data -o jsonpath='{.status.allocatedResourceStatuses}') ]] || fail "allocatedResourceStatuses left"
[[ $(k get pvc data -o jsonpath='{.status.allocatedResources.storage}') == 96Mi ]] || fail "allocatedResources not 96Mi"
wait_event data VolumeResizeSuccessful >/dev/null

step "the data outlives its pod: a second pod reads it"
k delete pod writer --wait=true --timeout=60s >/dev/null
[[ ! -e $target ]] || fail "kubelet's target $target left after the pod"
claim_pod reader data 'cat /data/f && sleep 3600' | k apply -f - >/dev/null
wait_log reader via-csi

step "read-only claim; fsGroup"
claim shared nv-default 16Mi
bound shared || prov_fail "claim shared (default volumeSource) not Bound"
spv=$(k get pvc shared -o jsonpath='{.spec.volumeName}')
[[ -n $(k get pv "$spv" -o jsonpath='{.spec.csi.driver}') ]] || fail "the default volumeSource made no spec.csi PV"
pod_with grouped 'id -G; echo mine > /data/g && stat -c %g /data/g && sleep 3600' \
  "persistentVolumeClaim: {claimName: shared}" "securityContext: {runAsUser: 1000, fsGroup: 4321}" |
  k apply -f - >/dev/null || fail "apply pod grouped"
wait_log grouped 4321
k delete pod grouped --wait=true --timeout=60s >/dev/null
pod_with ro 'cat /data/g; touch /data/no 2>/dev/null && echo WROTE || echo refused; sleep 3600' \
  "persistentVolumeClaim: {claimName: shared, readOnly: true}" | k apply -f - >/dev/null || fail "apply pod ro"
wait_log ro refused
ro_target=$K8S_PODS_ROOT/$(k get pod ro -o jsonpath='{.metadata.uid}')/volumes/kubernetes.io~csi/$spv/mount
findmnt -n -o OPTIONS "$ro_target" | grep -qE '(^|,)ro(,|$)' || fail "read-only claim mounted rw at $ro_target"

step "an inline CSI volume lives and dies with its pod"
pod_with inline 'echo scratch > /data/f && cat /data/f && sleep 3600' \
  "csi: {driver: nodevol.io, volumeAttributes: {pool: default, size: 16Mi}}" |
  k apply -f - >/dev/null || fail "apply pod inline"
wait_log inline scratch
iuid=$(k get pod inline -o jsonpath='{.metadata.uid}')
ctl volume list | grep -q "ephemeral-$iuid-data" || fail "no inline volume ephemeral-$iuid-data on the node: $(ctl volume list)"
k delete pod inline --wait=true --timeout=60s >/dev/null
for _ in $(seq 40); do ctl volume list | grep -q "ephemeral-$iuid" || break; sleep 0.5; done
! ctl volume list | grep -q "ephemeral-$iuid" || fail "the inline volume outlived its pod"

step "kubelet restarted: mounts kept, the driver registered again"
rid=$(mount_id "$K8S_PODS_ROOT/$(k get pod reader -o jsonpath='{.metadata.uid}')/volumes/kubernetes.io~csi/$pv/mount")
[[ -n $rid ]] || fail "reader's mount not found"
regs=$(grep -c "csi: kubelet registered driver" "$K8S_WORK/logs/nodevold.log")
"$K8S_WORK/bin/restart-kubelet"
k wait --for=condition=Ready "node/$K8S_NODE" --timeout=120s >/dev/null || fail "node not Ready after the kubelet restart"
[[ $(mount_id "$K8S_PODS_ROOT/$(k get pod reader -o jsonpath='{.metadata.uid}')/volumes/kubernetes.io~csi/$pv/mount") == "$rid" ]] \
  || fail "reader's mount changed across the kubelet restart"
for _ in $(seq 60); do (($(grep -c "csi: kubelet registered driver" "$K8S_WORK/logs/nodevold.log") > regs)) && break; sleep 0.5; done
(($(grep -c "csi: kubelet registered driver" "$K8S_WORK/logs/nodevold.log") > regs)) || fail "the restarted kubelet did not register nodevol.io again"
claim after-kubelet nv-default 16Mi
bound after-kubelet || prov_fail "claim after-kubelet not Bound"
claim_pod after-kubelet after-kubelet 'echo ok-after-kubelet && sleep 3600' | k apply -f - >/dev/null
wait_log after-kubelet ok-after-kubelet

step "nodevold killed -9 and started again: kubelet dials it again"
kill -9 "$NODEVOLD_PID"; wait "$NODEVOLD_PID" 2>/dev/null || true
nodevold_start "${nodevold_args[@]}"
claim after-kill nv-default 16Mi
bound after-kill 120 || prov_fail "claim after-kill not Bound"
claim_pod after-kill after-kill 'echo ok-after-kill && sleep 3600' | k apply -f - >/dev/null
wait_log after-kill ok-after-kill

step "nodevold down when a pod starts: an event, then the pod runs once it is back"
k delete pod after-kubelet after-kill --wait=true --timeout=60s >/dev/null
kill "$NODEVOLD_PID"; wait "$NODEVOLD_PID" 2>/dev/null || true
claim_pod waiting after-kill 'echo ok-waiting && sleep 3600' | k apply -f - >/dev/null
msg=$(wait_event waiting FailedMount)
step "while nodevold is down: $(head -1 <<<"$msg")"
nodevold_start "${nodevold_args[@]}"
wait_log waiting ok-waiting

step "30 pods at once, each with its own claim"
n=30
for i in $(seq $n); do
  claim "many-$i" nv-csi 8Mi
  claim_pod "many-$i" "many-$i" "echo up-$i && sleep 3600" | k apply -f - >/dev/null
done
for i in $(seq $n); do
  k wait --for=condition=Ready "pod/many-$i" --timeout=300s >/dev/null || prov_fail "pod many-$i not Ready"
done
(($(csi_mounts) >= n)) || fail "$(csi_mounts) CSI mounts for $n pods"

step "all pods gone: no mount left, volumes deleted with their claims"
k delete pods --all --grace-period=1 --timeout=120s >/dev/null
for _ in $(seq 60); do (($(csi_mounts) == 0)) && break; sleep 0.5; done
(($(csi_mounts) == 0)) || fail "CSI mounts left under the pods root: $(grep "kubernetes.io~csi" /proc/self/mountinfo)"
k delete pvc --all --wait=true --timeout=120s >/dev/null
for _ in $(seq 120); do [[ -z $(k get pv -o name) ]] && break; sleep 0.5; done
[[ -z $(k get pv -o name) ]] || prov_fail "PVs left: $(k get pv -o name)"
[[ $(ctl -o json volume list | grep -c '"name"') == 0 ]] || fail "volumes left: $(ctl volume list)"
step "ok"
