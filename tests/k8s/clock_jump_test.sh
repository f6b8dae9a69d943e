#!/usr/bin/env bash
# Under the real control plane (run by cluster-up): the wall clock of one of
# two nodevol-provisioner replicas jumps while they elect a leader on the
# Lease and provision. Replica b runs under libfaketime with only
# CLOCK_REALTIME moved (FAKETIME_DONT_FAKE_MONOTONIC=1), from a file the
# test rewrites: what an NTP step or a bad RTC does to one node.
# Leader election must measure leases on the monotonic clock only
# (provisioner/leader/leader_elector.h), so:
#  1. a leads; b's clock jumps 1 h ahead: b does not take the lease (the
#     renewTime a writes looks an hour old to b's wall clock) and 20 claims
#     bind exactly once;
#  2. a killed -9 (no release): b takes the lease once it has seen no
#     renewal for the lease duration by its own monotonic clock,
#     its wall clock an hour off or not, and provisions 20 more;
#  3. b's clock jumps 3 h ahead while it leads: it keeps the lease (its
#     renewTime is now 3 h in the others' future); a, started again with a
#     true clock, does not take it from the renewing leader; 20 more bind;
#  4. b's clock jumps 1 h back while it leads: every renewTime it writes is
#     an hour old to a's wall clock, and a must still not take the lease
#     from a leader that renews (a replica comparing renewTime with its own
#     clock would, and two would lead); 20 more bind; then b killed -9: a
#     takes over after the lease duration.
# Each step: the Lease's holder and transitions, exactly one PV and one
# volume per claim, nothing left after deleting all; while b leads, the
# renewTime it writes is as far off the true clock as its jump (so the
# jump happened).
# The replicas run with a lease of 8 s (renew deadline 6 s, retry 1 s;
# --lease-duration-seconds and its siblings) instead of client-go's 15/10/2:
# the jumps are hours, so what the test shows is the same at any lease,
# and each wait below is twice the lease (before: 25 s) or a takeover
# (before: 15-19 s). The defaults are k8s_provisioner's and deploy_pods'.
# Needs NODEVOL_PROVISIONER besides what lib.sh needs, and libfaketime
# (tests/k8s/deps).
K8S_TEST=clock-jump
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretend_nodes.sh"

faketime_lib=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1
[[ -e $faketime_lib ]] || fail "libfaketime is not installed (tests/k8s/deps)"
offset_file=$K8S_WORK/clock-b
echo "+0" >"$offset_file"
jump_b() { echo "$1" >"$offset_file"; step "replica b's wall clock now $1"; }

step "three pretend nodes; replica a, then replica b with a movable wall clock"
pn_init
pn_add pn-1 10.99.0.11 512m
pn_add pn-2 10.99.0.12 512m
pn_add pn-3 10.99.0.13 512m
storage_class nv-now pool=default
transitions() { k get lease nodevol.io-provisioner -o jsonpath='{.spec.leaseTransitions}' 2>/dev/null || echo 0; }
wait_leader() {  # ID SECONDS: until replica ID leads with its controller started; prints how long it took
  local t0=$SECONDS
  for _ in $(seq $(($2 * 2))); do
    [[ $(leader) == "$1" ]] && grep -q "controller started" "$K8S_WORK/logs/prov-$1.log" && { echo $((SECONDS - t0)); return 0; }
    sleep 0.5
  done
  pn_fail "replica $1 does not lead after $2 s (holder '$(lease_holder)')"
}
# keeps_leading ID SECONDS: the holder stays ID all that time.
keeps_leading() {
  local h0 i
  h0=$(lease_holder)
  for ((i = 0; i < $2; i++)); do
    [[ $(lease_holder) == "$h0" && $(leader) == "$1" ]] || pn_fail "the lease moved from $1 ($h0) to '$(lease_holder)' after $i s"
    sleep 1
  done
}
LEASE=8
LEASE_ARGS=(--lease-duration-seconds=$LEASE --renew-deadline-seconds=6 --retry-period-seconds=1)
KEEP=$((2 * LEASE))
total=0
# burst SET: 20 claims, all bound, everything consistent.
burst() {
  claims_yaml "$1" 1 20 nv-now 1Mi | k create -f - >/dev/null || fail "create claims $1"
  total=$((total + 20))
  for _ in $(seq 90); do [[ $(pn_counts) == "$total $total" ]] && break; sleep 1; done
  [[ $(pn_counts) == "$total $total" ]] || pn_fail "after 90 s: $(pn_counts) (bound, PVs); expected $total $total"
  pn_consistent "$total"
}

prov_replica a "${LEASE_ARGS[@]}"
wait_leader a 60 >/dev/null
PROV_LOG=$K8S_WORK/logs/prov-a.log PROV_OFF=1
prov_wait_nodes
LD_PRELOAD=$faketime_lib FAKETIME_TIMESTAMP_FILE=$offset_file FAKETIME_DONT_FAKE_MONOTONIC=1 \
  FAKETIME_CACHE_DURATION=1 prov_replica b "${LEASE_ARGS[@]}"
for _ in $(seq 60); do grep -q "leader is now" "$K8S_WORK/logs/prov-b.log" 2>/dev/null && break; sleep 0.5; done
grep -q "leader is now" "$K8S_WORK/logs/prov-b.log" || pn_fail "replica b never saw the leader"
t_start=$(transitions)
step "a leads as $(lease_holder); b stands by (lease transitions so far: $t_start)"

# b_skew WANT: b leads, and the renewTime it writes is WANT seconds (within
# 30) off this host's clock: b's wall clock really moved. Without it (no
# LD_PRELOAD, a libfaketime that ignores the file) every step below
# passes and proves nothing.
b_skew() {
  local t s
  sleep 2  # a renewal since the jump (retry 1 s, faketime's cache 1 s)
  t=$(k get lease nodevol.io-provisioner -o jsonpath='{.spec.renewTime}')
  s=$(($(date -d "$t" +%s) - $(date +%s)))
  ((s > $1 - 30 && s < $1 + 30)) ||
    pn_fail "b's renewTime $t is $s s off the true clock, expected $1: b's clock did not move (libfaketime?)"
  step "    renewTime written by b: $t ($s s off the true clock)"
}

# --- 1.
jump_b "+1h"
keeps_leading a $KEEP
burst one
step "1. after b's jump ahead a kept the lease for $KEEP s; 20 claims bound once"

# kill9 ID: replica ID's provisioner killed -9 and not restarted (no
# release of the lease, as a crash or a node lost).
kill9() {
  kill -STOP "${REPLICA_PID[$1]}"
  kill -KILL "$(cat "$K8S_WORK/prov-$1.pid")"
  kill -KILL "${REPLICA_PID[$1]}"
  wait "${REPLICA_PID[$1]}" 2>/dev/null || true
}

# failover FROM TO: FROM killed -9; TO leads once the lease has run out
# (FROM renewed at most a retry period, 1 s, before it was killed; the
# clock here counts whole seconds).
failover() {
  kill9 "$1"
  took=$(wait_leader "$2" 60)
  ((took >= LEASE - 2)) || pn_fail "$2 took the lease $took s after $1 was killed, before the $LEASE s lease ran out"
}

# --- 2.
step "2. replica a killed -9"
failover a b
step "b leads $took s after a was killed (lease $LEASE s), its clock 1 h ahead"
b_skew 3600
PROV_LOG=$K8S_WORK/logs/prov-b.log PROV_OFF=1
burst two

# --- 3.
jump_b "+3h"
prov_replica a "${LEASE_ARGS[@]}"
for _ in $(seq 60); do grep -q "leader is now" "$K8S_WORK/logs/prov-a.log" 2>/dev/null && break; sleep 0.5; done
keeps_leading b $KEEP
b_skew 10800
burst three
step "3. b kept leading for $KEEP s after its clock jumped 3 h ahead, a started again with a true clock; 20 more bound"

# --- 4.
jump_b "-1h"
keeps_leading b $KEEP
b_skew -3600
burst four
step "4. b kept leading for $KEEP s with its clock 1 h behind; a did not take the lease; 20 more bound"
failover b a
step "a leads $took s after b was killed -9"
PROV_LOG=$K8S_WORK/logs/prov-a.log PROV_OFF=1
step "lease transitions during the test: $(($(transitions) - t_start)) (b took over, then a)"
(($(transitions) - t_start == 2)) || pn_fail "expected 2 lease transitions, saw $(($(transitions) - t_start))"

k delete pvc -l 'set in (one,two,three,four)' --wait=false >/dev/null
for _ in $(seq 120); do [[ $(pn_counts) == "0 0" && -z $(pn_all_volumes) ]] && break; sleep 1; done
[[ $(pn_counts) == "0 0" && -z $(pn_all_volumes) ]] || pn_fail "left after deleting: $(pn_counts) (bound, PVs); volumes: $(pn_all_volumes | head)"
step "PASS: all $total deleted, nothing left"
