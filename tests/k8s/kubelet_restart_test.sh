#!/usr/bin/env bash
# Under the real kubelet (run by cluster-up): kubelet restarted while pods
# run. Its volume manager rebuilds its state from the pods directory and
# must not unmount a running pod's volume; afterwards new pods still mount.
K8S_TEST=kubelet-restart
source "$(dirname "$0")/lib.sh"
nodevold_start
static_pv_pvc r1
static_pv_pvc r2

step "pod a running with r1"
claim_pod a c-r1 'echo from-a > /data/f && sleep 3600' | k apply -f - >/dev/null
k wait --for=condition=Ready pod/a --timeout=120s >/dev/null || fail "a not Ready"
target_a=$(pod_target a pv-r1)
id_before=$(mount_id "$target_a")
[[ -n $id_before ]] || fail "$target_a not mounted"
unpub_before=$(grep -c "Unpublish" "$K8S_WORK/logs/nodevold.log" || true)

step "kubelet restarted"
old_pid=$(cat "$K8S_WORK/kubelet.pid")
"$K8S_WORK/bin/restart-kubelet"
new_pid=$(cat "$K8S_WORK/kubelet.pid")
[[ $new_pid != "$old_pid" ]] && ! kill -0 "$old_pid" 2>/dev/null && kill -0 "$new_pid" \
  || fail "kubelet not restarted (pid $old_pid -> $new_pid)"
# Back when its healthz answers and it has posted node status again.
for _ in $(seq 120); do
  ip netns exec "$K8S_NETNS" curl -sf http://127.0.0.1:10248/healthz >/dev/null 2>&1 && break
  sleep 0.5
done
ip netns exec "$K8S_NETNS" curl -sf http://127.0.0.1:10248/healthz >/dev/null 2>&1 || fail "kubelet did not come back"
step "kubelet healthy again"

step "pod b with r2 mounts after the restart"
claim_pod b c-r2 'echo from-b > /data/f && sleep 3600' | k apply -f - >/dev/null
k wait --for=condition=Ready pod/b --timeout=120s >/dev/null || fail "b not Ready after the kubelet restart"
[[ -n $(mount_id "$(pod_target b pv-r2)") ]] || fail "b's target not mounted"
[[ $(k exec b -- cat /data/f) == from-b ]] || fail "b cannot read its file"

# Look only once kubelet's own figures say it has acted on pod a: the
# restarted kubelet holds both pods' nodevol volumes as desired and as
# mounted. A kubelet that meant to tear a's volume down would have started
# by then; looking earlier would prove nothing. Usually it gets a's
# volume into its actual state by reconstruction from the pods directory
# (reconstruct_volume_operations_total: a's nodevol volume and its token);
# one clean-clone CI run showed reconstructed 0 with both volumes desired
# and mounted and no second Publish, i.e. a SetUp that found the mount
# point and called no driver (FlexVolume's SetUpAt returns early there).
# Either way a's mount must be the same one and nothing unpublished,
# checked below.
kubelet_metric() {  # NAME{LABELS}: its value on the restarted kubelet
  k get --raw "/api/v1/nodes/$K8S_NODE/proxy/metrics" 2>/dev/null | awk -v m="$1" 'index($0, m " ") == 1 {print $2}'
}
vm_total='volume_manager_total_volumes{plugin_name="nodevol.io/volume",state='
for _ in $(seq 120); do
  rec=$(kubelet_metric reconstruct_volume_operations_total)
  dsw=$(kubelet_metric "${vm_total}\"desired_state_of_world\"}")
  asw=$(kubelet_metric "${vm_total}\"actual_state_of_world\"}")
  ((${dsw:-0} == 2 && ${asw:-0} == 2)) && break
  sleep 0.5
done
((${dsw:-0} == 2 && ${asw:-0} == 2)) ||
  fail "kubelet never showed both pods' nodevol volumes desired and mounted (reconstructed ${rec:-?}, desired ${dsw:-?}, actual ${asw:-?})"
[[ $(kubelet_metric reconstruct_volume_operations_errors_total) == 0 ]] || fail "kubelet failed to reconstruct a volume after its restart"
step "kubelet reconstructed ${rec:-0} volumes; desired and actual state hold both nodevol volumes"
step "pod a's volume untouched"
[[ $(mount_id "$target_a") == "$id_before" ]] || fail "a's mount changed or vanished across the kubelet restart ($id_before -> $(mount_id "$target_a"))"
[[ $(k get pod a -o jsonpath='{.status.phase}') == Running ]] || fail "a no longer Running"
[[ $(k exec a -- cat /data/f) == from-a ]] || fail "a cannot read its file"
unpub_after=$(grep -c "Unpublish" "$K8S_WORK/logs/nodevold.log" || true)
[[ $unpub_after == "$unpub_before" ]] || fail "kubelet unpublished something across its restart: $(grep Unpublish "$K8S_WORK/logs/nodevold.log" | tail -3)"
step "PASS"
