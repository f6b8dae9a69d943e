#!/usr/bin/env bash
# Under the real control plane (run by cluster-up): a node's nodevold
# frozen (SIGSTOP) while nodevol-provisioner works: its TCP connections
# stay open and nothing answers, the worst way for a node to go, then
# thawed. Three pretend nodes (tests/k8s/pretend_nodes.sh); pn-2 has the
# most room, so placement picks it first.
# Checked:
#  1. pn-2 frozen, then 30 claims at once (Immediate, 1 MiB): within 40 s
#     the claims bind on pn-1 and pn-3, but for at most the 3 creates in
#     flight to pn-2 (NodeLoad's limit; the provisioner cannot know whether
#     those made a volume, and must not make a second one elsewhere).
#     40 s is well under the 60 s a node call may take: claims held up
#     until a frozen node's calls time out fail it (they did: all 30 waited
#     63 s, the seeding of earlier creates read the frozen node under one
#     lock). Prints how many bound, and when.
#  2. pn-2 thawed: every claim Bound to pvc-<uid>, exactly 30 PVs and 30
#     volumes, each on its PV's node (none twice, none left over).
#  3. all deleted: nothing left on any node.
#  4. the provisioner cut off in the middle of CreateVolume: pn-2 frozen
#     again and 30 more claims; once 27 are bound elsewhere, pn-2's answers
#     are dropped (iptables in the provisioner's network namespace, its TCP
#     connections left open) and it is thawed, so the creates waiting in
#     its sockets run there and their answers never come back. 15 s later
#     there are still exactly 30 volumes (none placed twice); once the
#     answers flow again every claim binds, the volumes pn-2 made without
#     an answer becoming their claims' PVs; nothing left after deleting.
# Needs NODEVOL_PROVISIONER besides what lib.sh needs.
K8S_TEST=node-cutoff
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretend_nodes.sh"
N=30

# all_bound WHEN: every one of the N claims Bound with its PV within 180 s,
# consistent with the nodes' volumes (WHEN names the moment, for the failure).
all_bound() {
  local b p
  for _ in $(seq 180); do
    read -r b p <<<"$(pn_counts)"
    ((b == N && p == N)) && break
    sleep 1
  done
  ((b == N && p == N)) || pn_fail "$1: $b of $N bound, $p PVs"
  pn_consistent "$N"
}
# all_deleted SET: the claims of SET deleted, nothing left anywhere.
all_deleted() {
  k delete pvc -l "set=$1" --wait=false >/dev/null
  for _ in $(seq 120); do [[ $(pn_counts) == "0 0" && -z $(pn_all_volumes) ]] && break; sleep 1; done
  [[ $(pn_counts) == "0 0" && -z $(pn_all_volumes) ]] || pn_fail "left after deleting: $(pn_counts) (bound, PVs); volumes: $(pn_all_volumes | head)"
}
per_node() { awk '{ print $2 }' "$K8S_WORK/volumes.txt" | sort | uniq -c | tr -s ' \n' ' '; }

step "three pretend nodes, pn-2 with the most room"
pn_init
pn_add pn-1 10.99.0.11 256m
pn_add pn-2 10.99.0.12 1g
pn_add pn-3 10.99.0.13 256m
storage_class nv-now pool=default
prov_start prov
prov_wait_nodes

# --- 1.
step "1. pn-2's nodevold frozen; $N claims"
kill -STOP "${PN_PID[pn-2]}"
t0=$(date +%s.%N)
claims_yaml cut 1 "$N" nv-now 1Mi | k create -f - >/dev/null || fail "create $N claims"
# In flight to pn-2 at most: NodeLoad's limit of creates per node (3).
want=$((N - 3)) progress= b=0
for i in $(seq 40); do
  read -r b _ <<<"$(pn_counts)"
  ((i % 10 == 0)) && progress+=" ${i}s:$b"
  ((b >= want)) && break
  sleep 1
done
step "while pn-2 was frozen: $b of $N bound after $(elapsed "$t0") s (progress:${progress:- at once})"
((b >= want)) || pn_fail "only $b of $N claims bound in 40 s with one node of three frozen; expected at least $want"
[[ -z $(pv_nodes | awk '$2 == "pn-2"') ]] || pn_fail "a PV on pn-2 while it was frozen"

# --- 2.
step "2. pn-2 thawed"
kill -CONT "${PN_PID[pn-2]}"
t1=$(date +%s.%N)
all_bound "after the thaw"
step "all $N bound $(elapsed "$t1") s after the thaw; per node: $(per_node)"

# --- 3.
all_deleted cut
step "all deleted, nothing left"

# --- 4.
step "4. pn-2 frozen, $N claims, then its answers dropped and it thawed: creates run there, unanswered"
kill -STOP "${PN_PID[pn-2]}"
t0=$(date +%s.%N)
claims_yaml net 1 "$N" nv-now 1Mi | k create -f - >/dev/null || fail "create $N claims"
b=0
for _ in $(seq 40); do
  read -r b _ <<<"$(pn_counts)"
  ((b >= want)) && break
  sleep 1
done
((b >= want)) || pn_fail "only $b of $N claims bound in 40 s with pn-2 frozen; expected at least $want"
# The creates sent to pn-2 wait in its sockets; it runs them once thawed,
# and the answers are lost: the provisioner cut off in the middle of them.
drop=(INPUT -p tcp -s "${PN_IP[pn-2]}" --sport 9809 -j DROP)
in_ns iptables -A "${drop[@]}" || fail "iptables"
kill -CONT "${PN_PID[pn-2]}"
made=0
for _ in $(seq 20); do made=$(pn_volumes pn-2 | wc -l); ((made >= N - b)) && break; sleep 0.5; done
step "$b of $N bound on pn-1 and pn-3 in $(elapsed "$t0") s; pn-2 thawed with its answers dropped made $made volumes"
((made > 0)) || pn_fail "pn-2 made no volume once thawed: the cut did not land in the middle of a create"
sleep 15
read -r b p <<<"$(pn_counts)"
total=$(pn_all_volumes | wc -l)
step "15 s later, the answers still dropped: $b bound, $p PVs, $total volumes on the nodes"
((total == N)) || pn_fail "$total volumes for $N claims while pn-2's answers were dropped: a claim was placed twice"
in_ns iptables -D "${drop[@]}" || fail "iptables -D"
t1=$(date +%s.%N)
all_bound "after the answers flowed again"
step "all $N bound $(elapsed "$t1") s after the cut ended, pn-2's unanswered volumes became their PVs; per node: $(per_node)"
all_deleted net
step "PASS: all deleted, nothing left"
