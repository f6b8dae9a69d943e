#!/usr/bin/env bash
# Under the real control plane (run by cluster-up): two nodevol-provisioner
# replicas (leader election on the Lease; each restarted when it exits, as
# its pod would be) against three pretend nodes (tests/k8s/pretend_nodes.sh).
# Checked:
#  6. 200 claims at once (Immediate, 1 MiB), the leader killed -9 part way:
#     exactly 200 PVs, 200 volumes across the nodes' nodevolds (one per PV,
#     on the node its PV names), every claim Bound to pvc-<its uid>; all
#     deleted -> no PV and no volume left. Prints how long each part took.
#  6b. a volume the leader made but saved no PV for (the leader frozen and
#     killed): the next leader reads it from its node and saves the PV
#     there, though placement alone would choose another node.
#  7. claims in flight while kube-apiserver is restarted and etcd compacted,
#     both replicas electing (the leader's watches resume from an expired
#     resourceVersion and relist, or, cut off past the renew deadline, it
#     exits without releasing and a replica takes over), more claims after:
#     volumes = PVs = claims, none doubled.
# Needs NODEVOL_PROVISIONER besides what lib.sh needs.
K8S_TEST=multinode-scale
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretend_nodes.sh"
T_START=$SECONDS
N=${MULTINODE_CLAIMS:-200}

step "three pretend nodes, two provisioner replicas"
pn_init
pn_add pn-1 10.99.0.11 512m
pn_add pn-2 10.99.0.12 512m
pn_add pn-3 10.99.0.13 512m
storage_class nv-now pool=default
# The sweep runs often with a short grace: it must never take a volume
# whose claim is still being provisioned.
prov_replica a --orphan-sweep-seconds=5 --orphan-grace-seconds=5
prov_replica b --orphan-sweep-seconds=5 --orphan-grace-seconds=5
lead=
for _ in $(seq 120); do
  lead=$(leader) && grep -q "controller started" "$K8S_WORK/logs/prov-$lead.log" && break
  sleep 0.5
done
[[ -n $lead ]] || pn_fail "no replica leads (holder '$(lease_holder)')"
PROV_LOG=$K8S_WORK/logs/prov-$lead.log PROV_OFF=1
prov_wait_nodes
holder=$(lease_holder)
step "replica $lead leads as $holder and reaches the three nodes"

# check_consistent CLAIMS: every claim Bound to pvc-<uid>, exactly CLAIMS of
# our PVs, and the volumes on the nodes are exactly the PVs, each on its
# PV's node.
check_consistent() {
  pn_consistent "$1"
  step "consistent: $1 claims, PVs, volumes; per node: $(awk '{ print $2 }' "$K8S_WORK/volumes.txt" | sort | uniq -c | tr -s ' \n' ' ')"
}
# wait_counts BOUND PVS SECONDS: until `pn_counts` says so.
wait_counts() {
  local c
  for _ in $(seq "$3"); do
    c=$(pn_counts)
    [[ $c == "$1 $2" ]] && return 0
    sleep 1
  done
  pn_fail "after $3 s: $c (bound claims, PVs); expected $1 $2"
}

# --- 6.
step "6. $N claims at once; the leader killed -9 part way"
t0=$(date +%s.%N)
claims_yaml scale 1 "$N" nv-now 1Mi | k create -f - >/dev/null || fail "create $N claims"
step "$N claims created in $(elapsed "$t0") s"
killed_at= t_kill= took_over= all_pvs= p_at_kill=
# Polled every 0.2 s, so that the kill lands part way (checked below).
for _ in $(seq 1500); do
  read -r b p <<<"$(pn_counts)"
  if [[ -z $killed_at ]] && ((p >= N / 4)); then
    kill -9 "$(cat "$K8S_WORK/prov-$lead.pid")"
    t_kill=$(date +%s.%N)
    killed_at="$(elapsed "$t0") s ($p PVs, $b bound)" p_at_kill=$p
    step "leader $lead killed -9 at $killed_at"
  fi
  if [[ -n $t_kill && -z $took_over ]] && h=$(lease_holder) && [[ -n $h && $h != "$holder" ]]; then
    took_over="$h after $(elapsed "$t_kill") s"
    step "lease taken over by $took_over"
  fi
  [[ -z $all_pvs ]] && ((p == N)) && all_pvs=$(elapsed "$t0")
  ((b == N && p == N)) && break
  sleep 0.2
done
((b == N && p == N)) || pn_fail "after $(elapsed "$t0") s: $b of $N claims bound, $p PVs"
step "all $N PVs saved $all_pvs s and all claims bound $(elapsed "$t0") s after creation (leader killed at $killed_at; lease taken over by ${took_over:-nobody})"
[[ -n $took_over ]] || pn_fail "no other replica took the Lease over"
# The failover proves something only if the leader died part way.
[[ -n $p_at_kill ]] && ((p_at_kill < N)) ||
  pn_fail "the leader was killed at ${killed_at:-never}, when all $N PVs already existed: nothing was interrupted"
check_consistent "$N"
# What the new leader found on the nodes: volumes the killed one made and
# did not save a PV for (finished there, not made again elsewhere).
found=$({ grep -h "of claims not yet provisioned" "$K8S_WORK"/logs/prov-*.log || true; } | sed 's/.*node \([^ ]*\) holds \([0-9]*\).*/\1: \2/' | tr '\n' ' ')
step "creates of the killed leader finished on their nodes: ${found:-none in flight}"
# Later passes (resync, the restarted replica) must not add any.
sleep 5
check_consistent "$N"

t0=$(date +%s.%N)
k delete pvc -l set=scale --wait=false >/dev/null
wait_counts 0 0 300
for _ in $(seq 60); do
  [[ -z $(for n in "${PN_NAMES[@]}"; do pn_volumes "$n"; done) ]] && break
  sleep 0.5
done
[[ -z $(for n in "${PN_NAMES[@]}"; do pn_volumes "$n"; done) ]] || fail "volumes left on the nodes"
step "all $N deleted (claims, PVs, volumes) $(elapsed "$t0") s after the delete"

# --- 6b.
step "6b. a volume the leader made but saved no PV for: the next leader finishes it on its node"
# pn-3 made the fullest (a filler volume), so placement alone would never
# choose it; the volume of the claim is made there "by the leader", which
# is then frozen and killed before it saves a PV.
pn_ctl pn-3 volume create filler --pool default --size 300Mi >/dev/null || fail "filler volume on pn-3"
lead=$(leader) || pn_fail "no replica leads"
kill -STOP "$(cat "$K8S_WORK/prov-$lead.pid")"
claims_yaml seeded 1 1 nv-now 1Mi | k create -f - >/dev/null || fail "create claim seeded-1"
uid=
for _ in $(seq 60); do
  uid=$(k get pvc seeded-1 -o jsonpath='{.metadata.uid}{" "}{.metadata.annotations.volume\.kubernetes\.io/storage-provisioner}')
  [[ $uid == *" nodevol.io" ]] && break
  sleep 0.5
done
[[ $uid == *" nodevol.io" ]] || fail "claim seeded-1 not handed over to nodevol.io: '$uid'"
uid=${uid%% *}
pn_ctl pn-3 volume create "pvc-$uid" --pool default --size 1Mi --param nodevol.io/provisioner=nodevol.io \
  --param nodevol.io/pvc-namespace=default --param nodevol.io/pvc-name=seeded-1 \
  --param nodevol.io/reclaim-policy=Delete --param nodevol.io/storage-class=nv-now \
  --param "nodevol.io/pv-name=pvc-$uid" >/dev/null ||
  fail "volume pvc-$uid on pn-3"
kill -9 "$(cat "$K8S_WORK/prov-$lead.pid")"
t0=$(date +%s.%N)
node=
for _ in $(seq 120); do
  node=$(k get pv "pvc-$uid" -o jsonpath='{.metadata.annotations.nodevol\.io/node}' 2>/dev/null) && [[ -n $node ]] && break
  sleep 0.5
done
[[ $node == pn-3 ]] || pn_fail "claim seeded-1's PV names node '${node:-(none after 60 s)}', not pn-3 where its volume is"
for n in pn-1 pn-2; do
  ! pn_volumes "$n" | grep -qx "pvc-$uid" || fail "a second volume pvc-$uid was made on $n"
done
grep -h "node pn-3 holds 1 volume(s) of claims not yet provisioned" "$K8S_WORK"/logs/prov-*.log >/dev/null ||
  fail "no replica logged finding pvc-$uid on pn-3"
step "PV saved on pn-3 $(elapsed "$t0") s after the kill (lease takeover included); no second volume"
k delete pvc seeded-1 >/dev/null || fail "delete seeded-1"
pn_ctl pn-3 volume delete filler >/dev/null || fail "delete the filler volume"
wait_counts 0 0 120
for _ in $(seq 60); do [[ -z $(pn_volumes pn-3) ]] && break; sleep 0.5; done
[[ -z $(pn_volumes pn-3) ]] || fail "volumes left on pn-3: $(pn_volumes pn-3 | tr '\n' ' ')"

# --- 7.
step "7. claims in flight while kube-apiserver restarts and etcd is compacted"
# Both replicas keep running with leader election. A restart shorter than
# the renew deadline (10 s): the leader's informers resume and relist. A
# longer one: the leader exits at once, without draining or releasing the
# Lease (issue 26 item 1), is restarted, and whichever replica takes the
# Lease once it expires finishes the claims. Either way none is doubled.
declare -A OFF7
for id in a b; do OFF7[$id]=$(($(stat -c %s "$K8S_WORK/logs/prov-$id.log") + 1)); done
log7() { local id; for id in a b; do tail -c "+${OFF7[$id]}" "$K8S_WORK/logs/prov-$id.log"; done; }
# While the apiserver is down: two writes to etcd (its revision moves past
# every resourceVersion the provisioner has seen), then a compaction to the
# latest: every watch resumes from an expired resourceVersion.
cat >"$K8S_WORK/compact-etcd" <<EOF
#!/bin/sh
set -e
etcd() { nsenter --net=/run/netns/$K8S_NETNS curl -sf -X POST "http://127.0.0.1:2379/v3/kv/\$1" -d "\$2"; }
etcd put '{"key": "bm9kZXZvbC10ZXN0", "value": "MQ=="}' >/dev/null
etcd put '{"key": "bm9kZXZvbC10ZXN0", "value": "Mg=="}' >/dev/null
rev=\$(etcd range '{"key": "AA=="}' | sed -n 's/.*"revision":"\([0-9]*\)".*/\1/p')
etcd compaction "{\"revision\": \"\$rev\", \"physical\": true}" >/dev/null
echo "etcd compacted at revision \$rev" >&2
EOF
chmod +x "$K8S_WORK/compact-etcd"
claims_yaml r1 1 20 nv-now 1Mi | k create -f - >/dev/null || fail "create r1 claims"
t0=$(date +%s.%N)
"$K8S_WORK/bin/restart-apiserver" "$K8S_WORK/compact-etcd" || fail "restart-apiserver"
step "kube-apiserver back after $(elapsed "$t0") s; $(pn_counts) (bound claims, PVs) so far"
claims_yaml r2 1 20 nv-now 1Mi | k create -f - >/dev/null || fail "create r2 claims"
wait_counts 40 40 240
step "40 bound $(elapsed "$t0") s after the restart began"
relisted=$(log7 | grep -c "expired, relisting") || true
lost=$(log7 | grep -c "lost the lease .*; exiting at once") || true
log7 | grep -E "expired, relisting|lost the lease|released the lease" | head -6 >&2 || true
((relisted + lost > 0)) || pn_fail "no informer relisted after the compaction and no leader lost the lease"
step "$relisted informer relist(s), $lost lost lease(s); leader now $(lease_holder)"
sleep 5
check_consistent 40
claims_yaml r3 1 10 nv-now 1Mi | k create -f - >/dev/null || fail "create r3 claims"
wait_counts 50 50 120
check_consistent 50
pn_check_ready
step "PASS ($((SECONDS - T_START)) s)"
