#!/usr/bin/env bash
# Under the real control plane (run by cluster-up): nodevol-provisioner
# placing volumes across three pretend nodes (tests/k8s/pretend_nodes.sh),
# each a Node object backed by a real nodevold with a dir pool on a tmpfs of
# its own size (pn-1 96 MiB, pn-2 160 MiB, pn-3 224 MiB). Checked:
#  1. Immediate: a burst of equal claims is spread as most-free says (the
#     expected count per node computed from what each nodevold reports);
#     with --placement=binpack a claim goes to the fullest node that still
#     fits it, one too big for that node to the next, one too big for all
#     fails naming every node's figures;
#  3. claims of another provisioner's class: no PV, no event from us; a
#     claim whose class does not exist yet is provisioned once it does;
#  2. WaitForFirstConsumer: the scheduler's pick lacks room -> selected-node
#     removed with a Warning event -> the scheduler picks again -> Bound
#     on a node with room, nothing left on the first;
#  4. the node's nodevold down while its PV is deleted: VolumeFailedDelete,
#     PV kept; nodevold back: volume and PV deleted;
#  5. claim deleted while its PV cannot be saved (a ValidatingAdmissionPolicy
#     holds the create): with the provisioner alive, and with it killed -9
#     between CreateVolume and the PV save (the orphan sweep then cleans
#     up): no volume and no PV left.
# Needs NODEVOL_PROVISIONER besides what lib.sh needs.
K8S_TEST=multinode
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretend_nodes.sh"
T_START=$SECONDS

step "three pretend nodes"
pn_init
pn_add pn-1 10.99.0.11 96m
pn_add pn-2 10.99.0.12 160m
pn_add pn-3 10.99.0.13 224m
k get nodes -o wide >&2

storage_class nv-now pool=default
storage_class nv-wait binding=WaitForFirstConsumer pool=default
storage_class nv-other provisioner=example.com/other
pv_of() { k get pvc "$1" -o jsonpath='{.spec.volumeName}'; }
node_of_pv() { k get pv "$1" -o jsonpath='{.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]}'; }
# wait_capacity: until every pretend Node carries the capacity annotation
# (the provisioner reached its nodevold and watches its capacity).
wait_capacity() {
  local n a
  for n in "${PN_NAMES[@]}"; do
    for _ in $(seq 120); do
      a=$(k get node "$n" -o jsonpath='{.metadata.annotations.capacity\.nodevol\.io/default}')
      [[ -n $a ]] && break
      sleep 0.5
    done
    [[ -n $a ]] || pn_fail "node $n: no capacity annotation (provisioner never reached its nodevold)"
  done
}
# volume_nodes NAME: the pretend nodes whose nodevold has volume NAME.
volume_nodes() {
  local n
  for n in "${PN_NAMES[@]}"; do pn_ctl "$n" volume get "$1" >/dev/null 2>&1 && echo "$n"; done
  return 0
}

# --- 1. Immediate
prov_start prov-1 --leader-elect=false --log-level=debug
prov_wait_nodes
wait_capacity
declare -A FREE
for n in "${PN_NAMES[@]}"; do FREE[$n]=$(pn_free "$n"); done
step "free bytes: pn-1 ${FREE[pn-1]}, pn-2 ${FREE[pn-2]}, pn-3 ${FREE[pn-3]}"
# Eight 40 MiB claims at once. A dir pool's free space does not move when a
# volume is made (an empty directory), so what spreads them is the
# provisioner's reservations (held 10 s after each create): most-free picks
# the largest room left each time, ties to the smaller name.
n_burst=8 size=$((40 << 20))
declare -A WANT ROOM
for n in "${PN_NAMES[@]}"; do WANT[$n]=0 ROOM[$n]=${FREE[$n]}; done
for ((i = 0; i < n_burst; i++)); do
  best=
  for n in "${PN_NAMES[@]}"; do
    ((ROOM[$n] >= size)) || continue
    [[ -z $best ]] || ((ROOM[$n] > ROOM[$best])) && best=$n
  done
  ROOM[$best]=$((ROOM[$best] - size)) WANT[$best]=$((WANT[$best] + 1))
done
step "1. Immediate: $n_burst claims of 40Mi; most-free expects pn-1 ${WANT[pn-1]}, pn-2 ${WANT[pn-2]}, pn-3 ${WANT[pn-3]}"
t0=$(date +%s.%N)
claims_yaml burst 1 "$n_burst" nv-now 40Mi | k create -f - >/dev/null || fail "create burst claims"
for ((i = 1; i <= n_burst; i++)); do bound "burst-$i" || pn_fail "claim burst-$i not Bound"; done
burst_s=$(elapsed "$t0")
step "all $n_burst bound in $burst_s s"
declare -A GOT
for n in "${PN_NAMES[@]}"; do GOT[$n]=0; done
for ((i = 1; i <= n_burst; i++)); do
  pv=$(pv_of "burst-$i") n=$(node_of_pv "$pv")
  [[ $(volume_nodes "$pv") == "$n" ]] || fail "PV $pv says node $n, the volume is on: $(volume_nodes "$pv")"
  [[ $(k get pv "$pv" -o jsonpath='{.metadata.annotations.nodevol\.io/node}') == "$n" ]] || fail "PV $pv's node annotation"
  GOT[$n]=$((GOT[$n] + 1))
done
# The pools are tmpfs dir pools, which do not enforce sizes, so the
# capacity ledger counts the sizes of the volumes made there
# (docs/scheduling.md). A finished create is counted until a report newer
# than its answer; a report that overtakes the answer leaves it counted
# twice for up to 10 s, which is safe but can send a claim to a roomier
# node than the ideal sequence would. So: never more than a node holds,
# and the roomier node never gets fewer.
got="pn-1 ${GOT[pn-1]}, pn-2 ${GOT[pn-2]}, pn-3 ${GOT[pn-3]}"
for n in "${PN_NAMES[@]}"; do
  ((GOT[$n] * size <= FREE[$n])) || pn_fail "most-free: $n got ${GOT[$n]} volumes of 40Mi, more than it holds ($got)"
done
((GOT[pn-3] >= GOT[pn-2] && GOT[pn-2] >= GOT[pn-1])) || pn_fail "most-free: a smaller node got more ($got)"
[[ ${GOT[pn-1]} == "${WANT[pn-1]}" && ${GOT[pn-2]} == "${WANT[pn-2]}" ]] || step "NOTE: not the ideal spread ($got)"

step "1b. binpack: the fullest node that fits; too big for it -> the next; too big for all -> failed"
# The burst's volumes go first: they count against their nodes' room.
k delete pvc -l set=burst --wait=true >/dev/null
for _ in $(seq 120); do
  [[ -z $(pn_volumes pn-1)$(pn_volumes pn-2)$(pn_volumes pn-3) ]] && break
  sleep 0.5
done
[[ -z $(pn_volumes pn-1)$(pn_volumes pn-2)$(pn_volumes pn-3) ]] || pn_fail "the burst's volumes were not deleted"
kill "$PROV_PID"; wait "$PROV_PID" 2>/dev/null || true
prov_start prov-1b --leader-elect=false --log-level=debug --placement=binpack
prov_wait_nodes
claim fit nv-now 64Mi   # fits pn-1 (96Mi): the least room that fits
claim big nv-now 128Mi  # too big for pn-1; pn-2 (160Mi) is the next
claim huge nv-now 200Mi # only pn-3 (224Mi)
for c in fit big huge; do bound "$c" || pn_fail "claim $c not Bound"; done
for pair in fit:pn-1 big:pn-2 huge:pn-3; do
  c=${pair%%:*} want=${pair#*:} pv=$(pv_of "${pair%%:*}")
  got=$(node_of_pv "$pv")
  [[ $got == "$want" ]] || pn_fail "binpack: claim $c on $got, expected $want"
  [[ $(volume_nodes "$pv") == "$want" ]] || fail "volume of $c not on $want alone: $(volume_nodes "$pv")"
done
claim toobig nv-now 300Mi
msg=$(wait_event toobig ProvisioningFailed "no node has room")
step "ProvisioningFailed: $msg"
for n in "${PN_NAMES[@]}"; do [[ $msg == *"$n"* ]] || fail "the event does not name $n: $msg"; done
! k get pv "pvc-$(k get pvc toobig -o jsonpath='{.metadata.uid}')" >/dev/null 2>&1 || fail "a PV for claim toobig"
kill "$PROV_PID"; wait "$PROV_PID" 2>/dev/null || true
k delete pvc toobig --wait=true >/dev/null
# Their sizes count against the nodes' room (dir pools do not enforce
# sizes, the ledger counts them): gone before the next steps.
k delete pvc fit big huge --wait=true >/dev/null
prov_start prov --leader-elect=false --log-level=debug --orphan-sweep-seconds=2 --orphan-grace-seconds=5
prov_wait_nodes
step "1. done ($((SECONDS - T_START)) s so far)"

# --- 3. other provisioners' claims; a class that appears later
step "3. another provisioner's claim is left alone; a missing class, then created"
t3=$SECONDS
claim foreign nv-other 8Mi
claim late nv-late 8Mi
sleep 5
fuid=$(k get pvc foreign -o jsonpath='{.metadata.uid}')
[[ $(k get pvc foreign -o jsonpath='{.status.phase}') == Pending ]] || fail "claim foreign not Pending"
[[ $(k get pvc late -o jsonpath='{.status.phase}') == Pending ]] || fail "claim late bound without a class"
k apply -f - >/dev/null <<YAML || fail "apply class nv-late"
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: nv-late}
provisioner: nodevol.io
parameters: {pool: default}
reclaimPolicy: Delete
YAML
# The PV controller hands the claim over on its next pass (every 15 s).
bound late 90 || pn_fail "claim late not provisioned after its class appeared"
step "claim late bound $((SECONDS - t3)) s after it was made"
! k get pv "pvc-$fuid" >/dev/null 2>&1 || fail "a PV for another provisioner's claim"
[[ -z $(volume_nodes "pvc-$fuid") ]] || fail "a volume for another provisioner's claim"
[[ $(k get pvc foreign -o jsonpath='{.status.phase}') == Pending ]] || fail "claim foreign not Pending"
ev=$(our_events foreign)
[[ -z $ev ]] || fail "nodevol-provisioner recorded events about another provisioner's claim: $ev"
# ... while it did about the one it provisioned.
[[ $(our_events late) == *ProvisioningSucceeded* ]] || fail "no ProvisioningSucceeded from us about late: $(our_events late)"

# --- 2. WaitForFirstConsumer, first pick lacks room
step "2. WaitForFirstConsumer: the scheduler's pick lacks room -> it picks again"
# The scheduler knows nothing of nodevol capacity (no CSIStorageCapacity for
# FlexVolume), so which node it picks among equals is its own (random) choice.
# To make the first pick the node without room, pn-2 and pn-3 are cordoned
# until the provisioner has given the claim back; then pn-1 is cordoned and
# the others opened, so the pick after the reschedule is a node with room.
t2=$SECONDS
k cordon pn-2 pn-3 >/dev/null
claim w1 nv-wait 128Mi  # pn-1 has 96Mi
cat <<YAML | k apply -f - >/dev/null || fail "pod p1"
apiVersion: v1
kind: Pod
metadata: {name: p1}
spec:
  terminationGracePeriodSeconds: 0
  containers: [{name: c, image: $PAUSE_IMAGE, imagePullPolicy: Never}]
  volumes: [{name: d, persistentVolumeClaim: {claimName: w1}}]
YAML
msg=$(wait_event w1 ProvisioningFailed "pick another node")
step "ProvisioningFailed: $msg"
[[ $msg == *pn-1* ]] || fail "the event does not name pn-1: $msg"
k cordon pn-1 >/dev/null
k uncordon pn-2 pn-3 >/dev/null
bound w1 120 || pn_fail "claim w1 not Bound after the reschedule"
pv=$(pv_of w1) n=$(node_of_pv "$pv")
sel=$(k get pvc w1 -o jsonpath='{.metadata.annotations.volume\.kubernetes\.io/selected-node}')
[[ $n == pn-2 || $n == pn-3 ]] || fail "w1 provisioned on $n"
[[ $sel == "$n" ]] || fail "selected-node $sel, PV on $n"
[[ $(volume_nodes "$pv") == "$n" ]] || fail "volume $pv on: $(volume_nodes "$pv")"
for _ in $(seq 60); do [[ $(k get pod p1 -o jsonpath='{.spec.nodeName}') == "$n" ]] && break; sleep 0.5; done
[[ $(k get pod p1 -o jsonpath='{.spec.nodeName}') == "$n" ]] || fail "pod p1 on '$(k get pod p1 -o jsonpath='{.spec.nodeName}')', PV on $n"
step "w1 bound on $n $((SECONDS - t2)) s after it was made"
k uncordon pn-1 >/dev/null
k delete pod p1 --grace-period=0 --force >/dev/null 2>&1

# --- 4. nodevold down during delete
step "4. the volume's nodevold is down while its PV is deleted"
claim d4 nv-now 8Mi
bound d4 || pn_fail "claim d4 not Bound"
pv4=$(pv_of d4) n4=$(node_of_pv "$pv4")
pn_nodevold_stop "$n4"
t4=$SECONDS
k delete pvc d4 --wait=true --timeout=60s >/dev/null
msg=$(wait_event "$pv4" VolumeFailedDelete)
step "VolumeFailedDelete after $((SECONDS - t4)) s: $msg"
sleep 2
k get pv "$pv4" >/dev/null 2>&1 || fail "PV $pv4 deleted while its volume could not be"
[[ $(k get pv "$pv4" -o jsonpath='{.status.phase}') == Released ]] || fail "PV $pv4 not Released"
pn_nodevold_start "$n4"
pn_ctl "$n4" volume get "$pv4" >/dev/null || fail "volume $pv4 gone from $n4 while its nodevold was down?"
t4b=$SECONDS
for _ in $(seq 240); do k get pv "$pv4" >/dev/null 2>&1 || break; sleep 0.5; done
! k get pv "$pv4" >/dev/null 2>&1 || pn_fail "PV $pv4 still there $((SECONDS - t4b)) s after nodevold came back"
! pn_ctl "$n4" volume get "$pv4" >/dev/null 2>&1 || fail "volume $pv4 still on $n4"
step "volume and PV deleted $((SECONDS - t4b)) s after $n4's nodevold came back"

# --- 5. claim deleted mid-provision
step "5. claim deleted while its PV cannot be saved"
# The policy answers 413 to creating a PV for claims named mid-*: an error
# the provisioner retries (5 tries, 10 s apart), so the window between
# CreateVolume and the PV save stays open while the test acts.
hold_pvs() {
  k apply -f - >/dev/null <<YAML || fail "apply the hold policy"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: hold-mid-pvs}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [persistentvolumes]}
  validations:
  - expression: "!has(object.spec.claimRef) || !object.spec.claimRef.name.startsWith('mid-')"
    message: held by the multinode test
    reason: RequestEntityTooLarge
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: hold-mid-pvs}
spec: {policyName: hold-mid-pvs, validationActions: [Deny]}
YAML
  # In force once the apiserver's admission has it: a dry run says so.
  for _ in $(seq 60); do
    k create --dry-run=server -f - >/dev/null 2>&1 <<YAML || return 0
apiVersion: v1
kind: PersistentVolume
metadata: {name: probe-hold}
spec:
  capacity: {storage: 1Mi}
  accessModes: [ReadWriteOnce]
  claimRef: {namespace: default, name: mid-probe}
  hostPath: {path: /nonexistent}
YAML
    sleep 0.5
  done
  fail "the hold policy never took effect"
}
release_pvs() { k delete validatingadmissionpolicybinding hold-mid-pvs >/dev/null; }
# held CLAIM LOG: until LOG says saving the claim's PV failed; prints the PV name.
held() {
  local uid
  uid=$(k get pvc "$1" -o jsonpath='{.metadata.uid}')
  for _ in $(seq 120); do
    grep -q "saving PV pvc-$uid failed" "$K8S_WORK/logs/$2.log" && { echo "pvc-$uid"; return 0; }
    sleep 0.5
  done
  pn_fail "the provisioner never tried to save claim $1's PV"
}
# gone PV: until neither a PV nor a volume of that name exists (120 s).
gone() {
  local t=$SECONDS
  while ((SECONDS - t < 120)); do
    ! k get pv "$1" >/dev/null 2>&1 && [[ -z $(volume_nodes "$1") ]] && return 0
    sleep 0.5
  done
  pn_fail "PV or volume $1 left behind (PV: $(k get pv "$1" -o jsonpath='{.status.phase}' 2>&1); volume on: $(volume_nodes "$1"))"
}
hold_pvs
t5=$SECONDS
claim mid-live nv-now 8Mi
pv5=$(held mid-live prov)
[[ -n $(volume_nodes "$pv5") ]] || fail "no volume $pv5 while its PV is being saved"
k delete pvc mid-live --wait=true >/dev/null
release_pvs
# Its pass goes on: the next try saves the PV (for a claim now gone), which
# the PV controller then releases and the provisioner deletes.
wait_event mid-live ProvisioningSucceeded >/dev/null
gone "$pv5"
step "provisioner alive: claim deleted, no volume or PV left after $((SECONDS - t5)) s"

hold_pvs
t5=$SECONDS
claim mid-kill nv-now 8Mi
pv5=$(held mid-kill prov)
vn=$(volume_nodes "$pv5")
[[ -n $vn ]] || fail "no volume $pv5 while its PV is being saved"
kill -9 "$PROV_PID"
wait "$PROV_PID" 2>/dev/null || true
k delete pvc mid-kill --wait=true >/dev/null
release_pvs
pn_ctl "$vn" volume get "$pv5" >/dev/null || fail "volume $pv5 gone before the provisioner came back"
prov_start prov --leader-elect=false --log-level=debug --orphan-sweep-seconds=2 --orphan-grace-seconds=5
gone "$pv5"
grep -q "orphan sweep: deleted volume $pv5" "$K8S_WORK/logs/prov.log" || fail "the sweep did not say it deleted $pv5"
step "provisioner killed -9 mid-provision: volume swept $((SECONDS - t5)) s after the claim was made"
k delete validatingadmissionpolicy hold-mid-pvs >/dev/null
pn_check_ready

step "PASS ($((SECONDS - T_START)) s)"
