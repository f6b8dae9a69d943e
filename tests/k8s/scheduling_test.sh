#!/usr/bin/env bash
# Under the real control plane (run by cluster-up): kube-scheduler placing
# pods by nodevol's capacity (issue 15; docs/scheduling.md). Three pretend
# nodes (tests/k8s/pretend_nodes.sh) with dir pools of 100, 200 and 400 MiB
# (tmpfs; sizes not enforced, so the ledger counts the sizes of the volumes
# made there). Checked:
#  1. a burst: 40 pods created at once, each with one WaitForFirstConsumer
#     claim, sizes 8-24 MiB (600 MiB in all: it fits the 700, but an even
#     spread does not fit the 100 MiB node), in two modes:
#       blind     no CSIDriver nodevol.io: the scheduler does not look at
#                 capacity; the provisioner turns the misses back
#                 (selected-node removed);
#       capacity  the CSIDriver of deploy/base and the provisioner's
#                 CSIStorageCapacity objects: the scheduler filters.
#     Each: no node holds more than its pool; the test prints the
#     reschedules (ProvisioningFailed "pick another node") and the time
#     from creation to all Bound. Capacity mode: every claim Bound. Blind
#     mode does not finish on its own (seen on v1.37.2): once the small
#     node is full, its pods are the ones that never bind, so it has the
#     fewest pods and kube-scheduler's scoring sends every retry back to
#     it. The test records how many were Bound when progress stopped,
#     then applies the CSIDriver and checks the rest are placed.
#     FlexVolume PVs are not affected by the CSIDriver.
#  2. capacity mode, a claim that fits no node: the pod stays Pending with
#     FailedScheduling "did not have enough free storage", nothing is made;
#     the 400 MiB node's pool grown to 600 MiB: it is placed there.
#  3. capacity mode, a pod with two 80 MiB claims (each fits the 100 MiB
#     node alone, both do not): both land on one node with room for both,
#     and nothing is left on the small one.
#  4. capacity shrinks behind the provisioner's back (a volume made with
#     nodevolctl on the big node): its object drops, and new pods go
#     elsewhere.
# Needs NODEVOL_PROVISIONER besides what lib.sh needs.
K8S_TEST=scheduling
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretend_nodes.sh"
deploy=$(cd "$(dirname "$0")/../../deploy" && pwd)
MiB=$((1 << 20))

step "three pretend nodes: 100, 200 and 400 MiB"
pn_init
pn_add pn-1 10.99.0.21 100m
pn_add pn-2 10.99.0.22 200m
pn_add pn-3 10.99.0.23 400m
declare -A POOL=([pn-1]=$((100 * MiB)) [pn-2]=$((200 * MiB)) [pn-3]=$((400 * MiB)))
storage_class nv-wait binding=WaitForFirstConsumer pool=default
prov_start prov --leader-elect=false --capacity-namespace=default
prov_wait_nodes

source "$(dirname "$0")/scheduling_lib.sh"

step "1. blind: no CSIDriver nodevol.io"
! k get csidriver nodevol.io >/dev/null 2>&1 || fail "a CSIDriver nodevol.io exists before the test made one"
t0=$(date +%s.%N)
pods_yaml blind 40 8 12 16 24 | k apply -f - >/dev/null || fail "creating the blind pods"
# Until no claim has bound for 30 s (or all have).
last=-1 still=0
while ((still < 30)); do
  b=$(bound_count blind)
  ((b == 40)) && break
  if ((b == last)); then still=$((still + 3)); else still=0 last=$b; fi
  sleep 3
done
secs=$(elapsed "$t0")
check_no_overcommit
step "blind: $b of 40 claims Bound after $secs s (progress stopped), $(reschedules) reschedules"
# The PVs are FlexVolume PVs whatever the CSIDriver says.
[[ $(k get pv -o jsonpath='{.items[0].spec.flexVolume.driver}') == nodevol.io/volume ]] || fail "not a flexVolume PV"

step "1. capacity: deploy/base's CSIDriver and the provisioner's CSIStorageCapacity objects (first for the blind pods left)"
# The objects exist for every node before the scheduler starts to
# require them (a node without one would be rejected).
for _ in $(seq 60); do
  [[ $(k get csistoragecapacities -o jsonpath='{range .items[?(@.storageClassName=="nv-wait")]}x{end}') == xxx ]] && break
  sleep 0.5
done
[[ $(k get csistoragecapacities -o jsonpath='{range .items[?(@.storageClassName=="nv-wait")]}x{end}') == xxx ]] \
  || pn_fail "not one CSIStorageCapacity per node for nv-wait: $(k get csistoragecapacities -o wide)"
k apply -f "$deploy/base/csidriver.yaml" >/dev/null || fail "apply the CSIDriver"
t0=$(date +%s.%N)
all_bound blind 40 300
check_no_overcommit
step "blind, then the CSIDriver: the other $((40 - b)) claims Bound $(elapsed "$t0") s after it"
clean blind

burst capacity
pod=$(k get pods -l set=capacity -o jsonpath='{.items[0].metadata.name}')
k get pod "$pod" -o jsonpath='{.spec.nodeName}' | grep -q '^pn-' || fail "pod $pod not scheduled onto a pretend node"
clean capacity

step "2. a claim that fits no node: Pending with the scheduler's reason, nothing made"
pods_yaml huge 1 450 | k apply -f - >/dev/null
wait_event huge-0 FailedScheduling "did not have enough free storage" >/dev/null
sleep 3
[[ -z $(k get pvc huge-0 -o jsonpath='{.metadata.annotations.volume\.kubernetes\.io/selected-node}') ]] \
  || fail "huge-0 got a selected node"
for n in "${PN_NAMES[@]}"; do [[ -z $(pn_volumes "$n") ]] || fail "a volume was made on $n"; done
step "pn-3's pool grown to 600 MiB: the pod is placed there"
mount -o remount,size=600m "$PN_DIR/pn-3/pool" || fail "growing pn-3's tmpfs"
POOL[pn-3]=$((600 * MiB))
bound huge-0 120 || pn_fail "huge-0 not Bound after pn-3 grew"
[[ $(node_of huge-0) == pn-3 ]] || fail "huge-0 on '$(node_of huge-0)', not pn-3"
clean huge
mount -o remount,size=400m "$PN_DIR/pn-3/pool" || fail "shrinking pn-3's tmpfs back"
POOL[pn-3]=$((400 * MiB))

step "3. a pod with two 80 MiB claims: both on one node with room for both"
k apply -f - >/dev/null <<YAML || fail "the two-claim pod"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: two-a, labels: {set: two}}
spec: {accessModes: [ReadWriteOnce], storageClassName: nv-wait, resources: {requests: {storage: 80Mi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: two-b, labels: {set: two}}
spec: {accessModes: [ReadWriteOnce], storageClassName: nv-wait, resources: {requests: {storage: 80Mi}}}
---
apiVersion: v1
kind: Pod
metadata: {name: two, labels: {set: two}}
spec:
  terminationGracePeriodSeconds: 0
  containers: [{name: c, image: $BUSYBOX_IMAGE, imagePullPolicy: Never, command: [sleep, "3600"]}]
  volumes: [{name: a, persistentVolumeClaim: {claimName: two-a}}, {name: b, persistentVolumeClaim: {claimName: two-b}}]
YAML
all_bound two 2 300
na=$(node_of two-a) nb=$(node_of two-b)
[[ $na == "$nb" && $na != pn-1 ]] || pn_fail "two-a on $na, two-b on $nb"
[[ -z $(pn_volumes pn-1) ]] || pn_fail "left on pn-1: $(pn_volumes pn-1)"
step "both on $na after $(reschedules) reschedule(s); nothing half-made on pn-1"
clean two

step "4. pn-3 filled behind the provisioner's back: new pods go elsewhere"
pn_ctl pn-3 volume create filler --pool default --size 390Mi >/dev/null || fail "nodevolctl volume create on pn-3"
obj=$(k get csistoragecapacities -o jsonpath='{range .items[?(@.nodeTopology.matchLabels.kubernetes\.io/hostname=="pn-3")]}{.metadata.name}{end}')
for _ in $(seq 60); do
  cap=$(k get csistoragecapacities "$obj" -o jsonpath='{.capacity}')
  [[ $cap =~ ^[0-9]+$ ]] || cap=$(numfmt --from=iec-i "$cap")  # the apiserver may say 10Mi
  ((cap < 20 * MiB)) && break
  sleep 0.5
done
((cap < 20 * MiB)) || pn_fail "pn-3's capacity object still says $cap bytes"
pods_yaml late 6 20 | k apply -f - >/dev/null
all_bound late 6 300
! pv_nodes | grep -q ' pn-3$' || pn_fail "a claim went to the full pn-3: $(pv_nodes)"
step "6 claims Bound, none on pn-3, $(reschedules) reschedule(s)"
pn_ctl pn-3 volume delete filler >/dev/null || fail "deleting the filler"
clean late
step "PASS"
