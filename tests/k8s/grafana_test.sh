#!/usr/bin/env bash
# Under the real control plane and kubelet (run by cluster-up): the Grafana
# dashboard deploy/grafana/nodevol.json queries only what nodevold and
# nodevol-provisioner export. Both run with /metrics on, a claim is
# provisioned and used by a pod, another is provisioned and deleted, a
# call fails (NOT_FOUND); then both are scraped and
# tests/deploy/check_dashboard.py checks every query's metrics and labels
# against the scrape. Labels may stay unverified only for families this
# one-node dir cluster cannot produce samples of (thin pools, snapshots).
# Needs NODEVOL_PROVISIONER besides what lib.sh needs.
K8S_TEST=grafana
source "$(dirname "$0")/lib.sh"
: "${NODEVOL_PROVISIONER:?}"
repo=$(cd "$(dirname "$0")/../.." && pwd)
tls=$K8S_WORK/tls
make_tls "$tls" "$K8S_NODE"
node_ip=$(k get node "$K8S_NODE" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
in_ns() { nsenter --net="/run/netns/$K8S_NETNS" "$@"; }

step "nodevold and the provisioner, both with /metrics"
K8S_NODEVOLD_METRICS=127.0.0.1:9808 nodevold_start --tls-listen="$node_ip:9809" \
  --tls-ca="$tls/ca.crt" --tls-cert="$tls/node.crt" --tls-key="$tls/node.key"
k label node "$K8S_NODE" nodevol.io/node=true >/dev/null
in_ns "$NODEVOL_PROVISIONER" --kubeconfig="$K8S_WORK/admin.kubeconfig" --metrics-address=127.0.0.1:9810 \
  --tls-ca="$tls/ca.crt" --tls-cert="$tls/provisioner.crt" --tls-key="$tls/provisioner.key" \
  >"$K8S_WORK/logs/provisioner.log" 2>&1 &
CLEANUP_PIDS+=("$!")

step "activity: a claim used by a pod, a claim deleted, a failed call"
storage_class nv-now pool=default
storage_class nv-wait binding=WaitForFirstConsumer pool=default
claim used nv-wait 32Mi
claim_pod user used 'echo x > /data/f && sleep 3600' | k apply -f - >/dev/null
claim gone nv-now 32Mi
bound gone 120 || fail "claim gone not Bound"
k wait --for=condition=Ready pod/user --timeout=120s >/dev/null || fail "pod user not Ready"
pv=$(k get pvc gone -o jsonpath='{.spec.volumeName}')
k delete pvc gone --wait=true --timeout=60s >/dev/null
for _ in $(seq 120); do k get pv "$pv" >/dev/null 2>&1 || break; sleep 0.5; done
! k get pv "$pv" >/dev/null 2>&1 || fail "PV $pv not deleted"
! ctl volume get no-such-volume >/dev/null 2>&1 || fail "volume get no-such-volume succeeded"

step "scrape both and check the dashboard"
in_ns curl -sf -m 5 http://127.0.0.1:9808/metrics >"$K8S_WORK/nodevold.metrics" || fail "no /metrics from nodevold"
for _ in $(seq 40); do
  in_ns curl -sf -m 5 http://127.0.0.1:9810/metrics >"$K8S_WORK/provisioner.metrics" || fail "no /metrics from the provisioner"
  grep -q '^controller_persistentvolume_delete_total{' "$K8S_WORK/provisioner.metrics" && break
  sleep 0.5
done
grep -q 'code="NOT_FOUND"' "$K8S_WORK/nodevold.metrics" || fail "nodevold's metrics have no NOT_FOUND call"
out=$("$repo/tests/deploy/check_dashboard.py" "$repo/deploy/grafana/nodevol.json" \
  "$K8S_WORK/nodevold.metrics" "$K8S_WORK/provisioner.metrics") || fail "the dashboard does not match the programs' metrics (above)"
echo "$out" >&2
unverified=${out##*no samples in the scrape): }
for f in ${unverified//,/ }; do
  case $f in
    nodevol_pool_thin_*|nodevol_provisioner_snapshot_*|none) ;;
    *) fail "labels of $f unverified: this test should have produced samples of it" ;;
  esac
done
step "PASS"
