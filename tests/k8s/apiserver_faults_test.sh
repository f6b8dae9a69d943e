#!/usr/bin/env bash
# Under the real control plane (run by cluster-up): nodevol-provisioner
# talks to kube-apiserver through tests/k8s/fault-proxy, which answers a
# share of its requests (reads, writes and watch starts alike) with 500 or
# 429 (Retry-After: 1) and holds others back, as an overloaded apiserver
# does. Three pretend nodes (tests/k8s/pretend_nodes.sh).
# Checked:
#  1. 200 claims at once (Immediate, 1 MiB) with 10 % of requests failed
#     (half 500, half 429; one request, method and path, at most once, so
#     that a claim's backoff stays bounded: a PV's delete makes four
#     distinct requests, so at most four failed passes, 15+30+60+120 s)
#     and 5 % delayed 1 s: all Bound to pvc-<uid>, exactly 200 PVs and 200
#     volumes on the nodes, each on its PV's node; the proxy really failed
#     requests (its counts are printed and must be non-zero); the
#     provisioner never exited.
#  2. all deleted under the same faults: no claim, PV or volume left;
#     DeleteVolume calls per PV printed.
#  3. the faults cleared: 20 more claims bind, and are deleted, at once.
# Prints what the user saw: Warning events by reason, the provisioner's
# retry log lines.
# Needs NODEVOL_PROVISIONER besides what lib.sh needs.
K8S_TEST=apiserver-faults
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pretend_nodes.sh"
N=${FAULT_CLAIMS:-200}
command -v python3 >/dev/null || fail "python3 is missing (scripts/deps installs it)"

step "three pretend nodes; the provisioner behind the fault proxy"
pn_init
pn_add pn-1 10.99.0.11 512m
pn_add pn-2 10.99.0.12 512m
pn_add pn-3 10.99.0.13 512m
storage_class nv-now pool=default

pki=$K8S_WORK/pki
stats=$K8S_WORK/fault-proxy.json
# nsenter execs the proxy itself: PROXY_PID is the proxy's (signals).
nsenter --net="/run/netns/$K8S_NETNS" python3 "$(dirname "$0")/fault-proxy" --listen 127.0.0.1:6444 --upstream 127.0.0.1:6443 \
  --ca "$pki/ca.crt" --cert "$pki/apiserver.crt" --key "$pki/apiserver.key" \
  --client-cert "$pki/admin.crt" --client-key "$pki/admin.key" \
  --error-rate 0.1 --max-per-request 1 --slow-rate 0.05 --slow-seconds 1 --stats "$stats" >"$K8S_WORK/logs/fault-proxy.log" 2>&1 &
PROXY_PID=$!
CLEANUP_PIDS+=("$PROXY_PID")
for _ in $(seq 50); do [[ -s $stats ]] && break; sleep 0.2; done
[[ -s $stats ]] || fail "the fault proxy did not start: $(cat "$K8S_WORK/logs/fault-proxy.log")"
sed 's|https://127.0.0.1:6443|https://127.0.0.1:6444|' "$K8S_WORK/admin.kubeconfig" >"$K8S_WORK/faulty.kubeconfig"
PROV_KUBECONFIG=$K8S_WORK/faulty.kubeconfig prov_start prov
prov_wait_nodes
proxy_counts() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" ".join("%s=%s" % kv for kv in sorted(d.items())))' "$stats"; }
step "provisioner started through the proxy: $(proxy_counts)"

# wait_counts BOUND PVS SECONDS
wait_counts() {
  local c
  for _ in $(seq "$3"); do
    c=$(pn_counts)
    [[ $c == "$1 $2" ]] && return 0
    kill -0 "$PROV_PID" 2>/dev/null || pn_fail "the provisioner exited"
    sleep 1
  done
  pn_fail "after $3 s: $c (bound claims, PVs); expected $1 $2; proxy: $(proxy_counts)"
}
# node_calls METHOD: OK calls of METHOD logged by the pretend nodevolds.
node_calls() { cat "$PN_DIR"/*/nodevold.log | grep -c "$1 volume=.* outcome=OK" || true; }
warnings() {
  k get events -o jsonpath='{range .items[?(@.type=="Warning")]}{.reason}{"\n"}{end}' | sort | uniq -c |
    awk '{ printf "%s%s=%s", sep, $2, $1; sep = " " }'
}

# --- 1.
step "1. $N claims at once, 10 % of requests failed, 5 % delayed"
t0=$(date +%s.%N)
creates0=$(node_calls CreateVolume)
claims_yaml fault 1 "$N" nv-now 1Mi | k create -f - >/dev/null || fail "create $N claims"
wait_counts "$N" "$N" 900
step "all $N bound in $(elapsed "$t0") s; proxy: $(proxy_counts)"
pn_consistent "$N"
read -r e500 e429 <<<"$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["injected_500"], d["injected_429"])' "$stats")"
((e500 > 0 && e429 > 0)) || pn_fail "the proxy injected $e500 500s and $e429 429s: nothing was tested"
step "consistent: $N claims, PVs, volumes; CreateVolume calls on the nodes: $(($(node_calls CreateVolume) - creates0))"
prov_says() { tail -c "+$PROV_OFF" "$PROV_LOG" | grep -c "$1" || true; }
w=$(warnings)
step "what the user saw: Warning events: ${w:-none}; provisioner log: $(prov_says 'sending it again') requests sent again after a 429, $(prov_says 'ServerError (500)') lines naming a 500"
tail -c "+$PROV_OFF" "$PROV_LOG" | grep "ServerError (500)" | head -3 >&2 || true

# --- 2.
step "2. all deleted under the same faults"
t0=$(date +%s.%N)
deletes0=$(node_calls DeleteVolume)
k delete pvc -l set=fault --wait=false >/dev/null
wait_counts 0 0 900
for _ in $(seq 60); do [[ -z $(pn_all_volumes) ]] && break; sleep 0.5; done
[[ -z $(pn_all_volumes) ]] || pn_fail "volumes left on the nodes: $(pn_all_volumes | head)"
step "all $N deleted (claims, PVs, volumes) in $(elapsed "$t0") s; DeleteVolume calls: $(($(node_calls DeleteVolume) - deletes0)) for $N PVs; proxy: $(proxy_counts)"
kill -0 "$PROV_PID" 2>/dev/null || pn_fail "the provisioner exited"

# --- 3.
step "3. faults cleared: 20 claims"
kill -USR1 "$PROXY_PID"
sleep 1
grep -q '"enabled": false' "$stats" || fail "the proxy did not stop injecting: $(cat "$stats")"
t0=$(date +%s.%N)
claims_yaml after 1 20 nv-now 1Mi | k create -f - >/dev/null || fail "create 20 claims"
wait_counts 20 20 60
pn_consistent 20
step "20 bound in $(elapsed "$t0") s with the faults cleared"
k delete pvc -l set=after --wait=false >/dev/null
wait_counts 0 0 60
for _ in $(seq 60); do [[ -z $(pn_all_volumes) ]] && break; sleep 0.5; done
[[ -z $(pn_all_volumes) ]] || pn_fail "volumes left on the nodes: $(pn_all_volumes | head)"
step "PASS: proxy $(proxy_counts)"
