#!/usr/bin/env bash
# Under the real kubelet (run by cluster-up): nodevold is down while a pod
# starts. kubelet's mount through nodevol-flex fails and the pod shows a
# FailedMount event carrying nodevol's message (which says to check
# nodevold); once nodevold is back the pod starts with no one touching it,
# through kubelet's own mount retries.
K8S_TEST=nodevold-down
source "$(dirname "$0")/lib.sh"
nodevold_start
static_pv_pvc d1

step "nodevold stopped, pod created"
kill "$NODEVOLD_PID"; wait "$NODEVOLD_PID" 2>/dev/null || true
[[ ! -S $NODEVOL_K8S_FLEX_SOCKET ]] || fail "socket $NODEVOL_K8S_FLEX_SOCKET left behind by a stopped nodevold"
claim_pod p1 c-d1 'echo up > /data/f && sleep 3600' | k apply -f - >/dev/null
msg=
for _ in $(seq 120); do
  msg=$(k get events --field-selector involvedObject.name=p1,reason=FailedMount -o jsonpath='{.items[*].message}')
  [[ -n $msg ]] && break
  sleep 0.5
done
[[ -n $msg ]] || fail "no FailedMount event for p1"
step "FailedMount: $msg"
[[ $msg == *nodevold* ]] || fail "FailedMount does not carry nodevol's message: $msg"
[[ $(k get pod p1 -o jsonpath='{.status.phase}') == Pending ]] || fail "p1 not Pending while nodevold is down"
uid=$(k get pod p1 -o jsonpath='{.metadata.uid}')
target=$K8S_PODS_ROOT/$uid/volumes/nodevol.io~volume/pv-d1
[[ -z $(mount_id "$target") ]] || fail "$target mounted while nodevold is down"

step "nodevold started again: the pod runs without intervention"
t0=$SECONDS
"$NODEVOLD" --config="$K8S_WORK/nodevold/nodevold.conf" --socket="$NODEVOL_K8S_FLEX_SOCKET" \
  --state-dir="$K8S_WORK/nodevold/state" --pods-root="$K8S_PODS_ROOT" --node-name="$K8S_NODE" \
  --pool="name=default,backend=dir,path=$K8S_WORK/nodevold/pool" \
  --metrics-address=off --log-target=stderr --log-level=debug >>"$K8S_WORK/logs/nodevold.log" 2>&1 &
NODEVOLD_PID=$!
CLEANUP_PIDS+=("$NODEVOLD_PID")
# kubelet retries a failed mount with exponential backoff up to about 2 min.
k wait --for=condition=Ready pod/p1 --timeout=200s >/dev/null || fail "p1 not Ready after nodevold came back"
step "p1 Ready $((SECONDS - t0)) s after nodevold started"
[[ -n $(mount_id "$target") ]] || fail "$target not mounted"
[[ $(k exec p1 -- cat /data/f) == up ]] || fail "p1 cannot read what it wrote"
[[ $(ctl -o json volume get d1 | grep -c "$target") -ge 1 ]] || fail "nodevold does not list $target as a publication of d1"
step "PASS"
