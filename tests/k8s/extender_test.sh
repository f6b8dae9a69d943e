#!/usr/bin/env bash
# Under the real control plane (run by cluster-up): kube-scheduler with
# nodevol's scheduler extender (issue 15, layer 3; docs/scheduling.md).
# kube-scheduler is restarted with deploy/scheduler/kube-scheduler-config.yaml
# (the URL pointed at the provisioner here); no CSIDriver and no capacity
# objects, so the extender alone knows the capacity. Three pretend nodes
# with dir pools of 100, 200 and 400 MiB, as in scheduling_test.sh.
# Checked:
#  1. a burst of 40 pods (8-24 MiB claims, 600 MiB in all): every claim
#     Bound, no node overcommitted, and no reschedule at all (the filter
#     promises each pod's bytes to its best node before the next pod).
#     1b. the same while four strangers hold 400 half-open connections
#     to the extender's port (issue 57): the same result.
#  2. a claim that fits no node: FailedScheduling with the extender's
#     figures, nothing made.
#  3. a pod with two 80 MiB claims (each alone fits the 100 MiB node):
#     both on one node with room for both, without a reschedule.
#  4. kube-scheduler restarted mid-burst: all Bound, none overcommitted.
#  5. the extender down, ignorable: false: pods wait (FailedScheduling
#     naming the extender), nothing is selected; back: all Bound.
#  6. the extender down, ignorable: true: pods are placed without it;
#     once the provisioner is back, all Bound, none overcommitted.
#  7. two replicas with leader election, the leader killed (SIGKILL)
#     mid-burst: the standby takes the Lease and the port; all Bound, none
#     overcommitted.
# The test prints each burst's time and reschedules.
# Needs NODEVOL_PROVISIONER besides what lib.sh needs.
K8S_TEST=extender
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretend_nodes.sh"
deploy=$(cd "$(dirname "$0")/../../deploy" && pwd)
MiB=$((1 << 20))
EXT=127.0.0.1:9811

step "three pretend nodes: 100, 200 and 400 MiB"
pn_init
pn_add pn-1 10.99.0.21 100m
pn_add pn-2 10.99.0.22 200m
pn_add pn-3 10.99.0.23 400m
declare -A POOL=([pn-1]=$((100 * MiB)) [pn-2]=$((200 * MiB)) [pn-3]=$((400 * MiB)))
storage_class nv-wait binding=WaitForFirstConsumer pool=default
source "$(dirname "$0")/scheduling_lib.sh"

# Mutual TLS as deploy/ ships it: a server certificate for 127.0.0.1, and
# kube-scheduler's client certificate, from the test CA.
pn_cert extender IP:127.0.0.1
pn_cert scheduler DNS:kube-scheduler clientAuth
# Whoever calls the extender chooses the pod, its claims and the nodes:
# without a client CA the provisioner refuses to serve it unless told.
rc=0
out=$(timeout 60 nsenter --net="/run/netns/$K8S_NETNS" "$NODEVOL_PROVISIONER" --kubeconfig="$K8S_WORK/admin.kubeconfig" \
  --tls-ca="$PN_TLS/ca.crt" --tls-cert="$PN_TLS/provisioner.crt" --tls-key="$PN_TLS/provisioner.key" \
  --metrics-address=off --leader-elect=false --extender-address="$EXT" 2>&1) || rc=$?
[[ $rc == 2 && $out == *--extender-unauthenticated* ]] ||
  fail "an extender without a client CA started (exit $rc): $out"
PROV_ARGS=(--log-level=debug --capacity-objects=false --extender-address="$EXT" --extender-tls-cert="$PN_TLS/extender.crt"
  --extender-tls-key="$PN_TLS/extender.key" --extender-tls-client-ca="$PN_TLS/ca.crt")
prov_up() {
  prov_start prov --leader-elect=false "${PROV_ARGS[@]}"
  prov_wait_nodes
  extender_wait
}
prov_down() {
  kill "$PROV_PID" 2>/dev/null
  wait "$PROV_PID" 2>/dev/null || true
}
# extender_wait: until the extender answers a filter (200).
extender_wait() {
  local body='{"Pod":{"metadata":{"name":"probe","namespace":"default"}},"NodeNames":["pn-1"]}'
  for _ in $(seq 120); do
    in_ns curl -sf -o /dev/null --cacert "$PN_TLS/ca.crt" --cert "$PN_TLS/scheduler.crt" --key "$PN_TLS/scheduler.key" \
      -H 'Content-Type: application/json' -d "$body" "https://$EXT/filter" && return 0
    sleep 0.5
  done
  pn_fail "the extender at $EXT never answered"
}
# scheduler_with IGNORABLE: kube-scheduler restarted with deploy's
# configuration, pointed at $EXT, ignorable as given.
scheduler_with() {
  local cfg=$K8S_WORK/scheduler-extender-$1.yaml
  sed -e "s|urlPrefix: .*|urlPrefix: https://$EXT|" -e "s|ignorable: .*|ignorable: $1|" \
    -e "s|serverName: .*|serverName: ${EXT%:*}|" -e "s|/etc/kubernetes/nodevol/|$PN_TLS/|" \
    "$deploy/scheduler/kube-scheduler-config.yaml" >"$cfg"
  grep -q "urlPrefix: https://$EXT" "$cfg" && grep -q "ignorable: $1" "$cfg" && grep -q "caFile: $PN_TLS/ca.crt" "$cfg" \
    || fail "editing the scheduler configuration"
  cat >>"$cfg" <<YAML
clientConnection: {kubeconfig: $K8S_WORK/scheduler.kubeconfig}
leaderElection: {leaderElect: false}
YAML
  "$K8S_WORK/bin/restart-scheduler" "$cfg" || fail "kube-scheduler did not start with $cfg"
}
# selected_count SET: claims of SET that carry a selected node.
selected_count() {
  k get pvc -l "set=$1" -o jsonpath='{range .items[*]}{.metadata.annotations.volume\.kubernetes\.io/selected-node}{"\n"}{end}' |
    grep -c . || true
}
# mid_burst SET AFTER ACTION...: 40 pods; once AFTER claims are Bound, ACTION;
# then all Bound, none overcommitted.
mid_burst() {
  local set=$1 after=$2 t0
  shift 2
  t0=$(date +%s.%N)
  pods_yaml "$set" 40 8 12 16 24 | k apply -f - >/dev/null || fail "creating the $set pods"
  for _ in $(seq 600); do (($(bound_count "$set") >= after)) && break; sleep 0.2; done
  step "  $(bound_count "$set") Bound: $*"
  "$@"
  all_bound "$set" 40 400
  check_no_overcommit
  step "$set: 40 claims Bound in $(elapsed "$t0") s with $(reschedules) reschedules"
}

! k get csidriver nodevol.io >/dev/null 2>&1 || fail "a CSIDriver nodevol.io exists: this test is about the extender alone"
prov_up
scheduler_with false

step "1. a burst of 40 pods through the extender"
burst extender
r=$(reschedules)
((r == 0)) || pn_fail "$r reschedules with the extender: $(k get events --field-selector reason=ProvisioningFailed -o jsonpath='{range .items[*]}{.involvedObject.name}: {.message}{"\n"}{end}' | head -3)"
clean extender

step "1b. the same burst while strangers on the pod network flood the extender's port"
# Four other addresses (127.0.0.0/8 is all loopback: the extender listens
# on 127.0.0.1, where kube-scheduler calls it) holding 100 half-open connections each (a TLS
# ClientHello's first bytes, then nothing; tcp_flood.cc), re-opening every
# one the extender closes: more than its connection slots. kube-scheduler
# (127.0.0.1) must still be served within its timeout (net/acceptor.h:
# the stranger's oldest connection makes room, never the scheduler's).
[[ -x ${TCP_FLOOD:-} ]] || fail "TCP_FLOOD (tests/k8s/tcp_flood) is not set"
flood_pids=()
for a in 127.0.0.96 127.0.0.97 127.0.0.98 127.0.0.99; do
  in_ns "$TCP_FLOOD" "$a" "${EXT%:*}" "${EXT#*:}" 100 600 >"$K8S_WORK/flood-$a.log" 2>&1 &
  flood_pids+=($!)
  CLEANUP_PIDS+=("$!")
done
sleep 3
step "  the flood: $(tail -1 "$K8S_WORK/flood-127.0.0.99.log")"
burst flooded
r=$(reschedules)
((r == 0)) || pn_fail "$r reschedules under the flood"
held=$(for a in 127.0.0.96 127.0.0.97 127.0.0.98 127.0.0.99; do tail -1 "$K8S_WORK/flood-$a.log"; done)
kill "${flood_pids[@]}" 2>/dev/null || true
wait "${flood_pids[@]}" 2>/dev/null || true
closed=$(sed -n 's/.*closed by the server \([0-9]*\)$/\1/p' <<<"$held" | awk '{ s += $1 } END { print s + 0 }')
step "  strangers' connections the extender closed meanwhile: $closed ($(tr '\n' ';' <<<"$held"))"
((closed > 0)) || pn_fail "the extender closed no stranger's connection: the flood did not reach it"
clean flooded

step "2. a claim that fits no node: Pending with the extender's figures, nothing made"
pods_yaml huge 1 450 | k apply -f - >/dev/null
m=$(wait_event huge-0 FailedScheduling "this pod needs 450.0MiB")
step "  $m"
[[ $m == *"pn-3: pool default has 400.0MiB free"* ]] || fail "no figures for pn-3 in: $m"
[[ $(selected_count huge) == 0 ]] || fail "huge-0 got a selected node"
for n in "${PN_NAMES[@]}"; do [[ -z $(pn_volumes "$n") ]] || fail "a volume was made on $n"; done
clean huge

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
all_bound two 2 120
na=$(node_of two-a) nb=$(node_of two-b)
[[ $na == "$nb" && $na != pn-1 ]] || pn_fail "two-a on $na, two-b on $nb"
((($(reschedules)) == 0)) || pn_fail "the two-claim pod was rescheduled"
step "both on $na, no reschedule"
clean two

step "4. kube-scheduler restarted mid-burst"
mid_burst restart 10 scheduler_with false
clean restart

step "5. the extender down, ignorable: false: pods wait"
r0=$(reschedules)
prov_down
pods_yaml down 6 20 | k apply -f - >/dev/null
m=$(wait_event down-0 FailedScheduling "$EXT/filter")
step "  $m"
sleep 5
[[ $(selected_count down) == 0 ]] || fail "a node was selected while the extender was down"
step "the provisioner back: all Bound"
prov_up
all_bound down 6 300
check_no_overcommit
# docs/scheduling.md: placed without a single reschedule once it answers.
(($(reschedules) == r0)) || pn_fail "$(($(reschedules) - r0)) reschedules after the extender came back"
clean down

step "6. the extender down, ignorable: true: pods are placed without it"
scheduler_with true
prov_down
pods_yaml loose 12 8 12 16 24 | k apply -f - >/dev/null
for _ in $(seq 120); do (($(selected_count loose) == 12)) && break; sleep 0.5; done
(($(selected_count loose) == 12)) || pn_fail "$(selected_count loose) of 12 claims got a node without the extender"
step "  12 nodes selected without the extender; the provisioner back"
prov_up
all_bound loose 12 300
check_no_overcommit
step "loose: 12 claims Bound, $(reschedules) reschedule(s)"
clean loose
scheduler_with false

step "7. two replicas, the leader killed mid-burst"
prov_down
prov_replica a --leader-elect=true --lease-namespace=default "${PROV_ARGS[@]}"
prov_replica b --leader-elect=true --lease-namespace=default "${PROV_ARGS[@]}"
extender_wait
kill_leader() {
  local holder id pid
  holder=$(k get lease -n default nodevol.io-provisioner -o jsonpath='{.spec.holderIdentity}')
  for id in a b; do
    pid=$(cat "$K8S_WORK/prov-$id.pid")
    if grep -q "leading as $holder " "$K8S_WORK/logs/prov-$id.log"; then
      step "  killing replica $id ($holder, pid $pid)"
      kill -9 "$pid"
      return 0
    fi
  done
  fail "no replica leads as '$holder'"
}
mid_burst failover 10 kill_leader
pn_check_ready
step "PASS"
