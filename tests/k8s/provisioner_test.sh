#!/usr/bin/env bash
# Under the real control plane and kubelet (run by cluster-up): dynamic
# provisioning by nodevol-provisioner. nodevold (dir pool) serves its Node
# API over mutual TLS on the node's address; the provisioner runs out of
# cluster with the admin kubeconfig, finds the node by its label, dials it
# and watches capacity. Checked:
#  - Immediate class: claim Bound to pvc-<uid> with node affinity, the
#    volume on nodevold carries the claim parameters, a pod writes to it,
#    capacity is mirrored onto the Node;
#  - WaitForFirstConsumer: nothing until a pod is scheduled, then Bound on
#    the selected node and the pod runs;
#  - expansion: a bound claim grown while its pod runs -> volume grown on
#    the node, PV capacity updated, kubelet's expandfs records it in the
#    claim's status;
#  - reclaim Delete: claim deleted -> volume and PV gone; Retain: both kept;
#  - bad class parameter: ProvisioningFailed naming it, nothing created;
#  - no room (Immediate): ProvisioningFailed with the per-node figures;
#    no room (WaitForFirstConsumer): selected-node removed (reschedule);
#  - orphan sweep: a volume it made (reclaim Delete) whose claim and PV are
#    gone is deleted; a Retain one, another provisioner's and bound ones stay;
#  - /healthz, /readyz, /metrics (the reference library's counters, the
#    registry and leader gauges);
#  - leader election: a second replica stands by (ready, not leading); the leader killed -9,
#    it takes the Lease over and provisions, at its first try: the
#    huge-wait claim above, selected onto this node and too large for it,
#    must not leave the node looking full (4b675c3: the claim failed "no
#    room" and waited its 15 s backoff).
# Needs NODEVOL_PROVISIONER (path) besides what lib.sh needs.
K8S_TEST=provisioner
source "$(dirname "$0")/lib.sh"
: "${NODEVOL_PROVISIONER:?}"
tls=$K8S_WORK/tls
make_tls "$tls" "$K8S_NODE"
node_ip=$(k get node "$K8S_NODE" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')

step "nodevold: dir pool, TLS on $node_ip:9809"
nodevold_start --tls-listen="$node_ip:9809" --tls-ca="$tls/ca.crt" --tls-cert="$tls/node.crt" --tls-key="$tls/node.key"

step "provisioner (out of cluster, admin kubeconfig)"
k label node "$K8S_NODE" nodevol.io/node=true >/dev/null
nsenter --net="/run/netns/$K8S_NETNS" "$NODEVOL_PROVISIONER" --kubeconfig="$K8S_WORK/admin.kubeconfig" \
  --tls-ca="$tls/ca.crt" --tls-cert="$tls/provisioner.crt" --tls-key="$tls/provisioner.key" \
  --orphan-sweep-seconds=3 --orphan-grace-seconds=0 \
  --log-level=debug >"$K8S_WORK/logs/provisioner.log" 2>&1 &
PROV_PID=$!
CLEANUP_PIDS+=("$PROV_PID")
prov_fail() { echo "---- provisioner log (tail)" >&2; tail -30 "$K8S_WORK/logs/provisioner.log" >&2; fail "$@"; }

storage_class nv-now backend=dir pool=default mode=0770
storage_class nv-wait binding=WaitForFirstConsumer expand=true pool=default
# A class made before the provisioner was renamed nodevol.io (its
# provisioner field cannot change): still served.
storage_class nv-keep reclaim=Retain pool=default provisioner=nodevol.io/provisioner
storage_class nv-bad pool=default colour=red

step "Immediate: claim bound to a provisioned PV"
claim now nv-now 64Mi
bound now || prov_fail "claim now not Bound"
uid=$(k get pvc now -o jsonpath='{.metadata.uid}')
pv=$(k get pvc now -o jsonpath='{.spec.volumeName}')
[[ $pv == "pvc-$uid" ]] || fail "PV is '$pv', not pvc-$uid"
[[ $(k get pv "$pv" -o jsonpath='{.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]}') == "$K8S_NODE" ]] \
  || fail "PV $pv not pinned to $K8S_NODE"
[[ $(k get pv "$pv" -o jsonpath='{.spec.capacity.storage}') == 64Mi ]] || fail "PV capacity $(k get pv "$pv" -o jsonpath='{.spec.capacity.storage}')"
[[ $(k get pv "$pv" -o jsonpath='{.metadata.finalizers[0]}') == external-provisioner.volume.kubernetes.io/finalizer ]] \
  || fail "PV $pv lacks the finalizer"
vol=$(ctl -o json volume get "$pv") || fail "nodevold has no volume $pv"
for want in '"nodevol.io/pvc-namespace": "default"' '"nodevol.io/pvc-name": "now"' '"nodevol.io/reclaim-policy": "Delete"' \
            '"nodevol.io/storage-class": "nv-now"' '"mode": "0770"'; do
  grep -qF "$want" <<<"$vol" || fail "volume $pv lacks $want: $vol"
done
wait_event now ProvisioningSucceeded >/dev/null
claim_pod use-now now 'echo provisioned > /data/f && sleep 3600' | k apply -f - >/dev/null
k wait --for=condition=Ready pod/use-now --timeout=120s >/dev/null || fail "pod use-now not Ready"
path=$(ctl -o json volume get "$pv" | sed -n 's/.*"path": *"\([^"]*\)".*/\1/p')
[[ $(cat "$path/f") == provisioned ]] || fail "the pod's file is not in the volume"
ann=
for _ in $(seq 40); do
  ann=$(k get node "$K8S_NODE" -o jsonpath='{.metadata.annotations.capacity\.nodevol\.io/default}')
  [[ -n $ann ]] && break; sleep 0.5
done
free=$(ctl -o json capacity default | sed -n 's/.*"free_bytes": *"\([0-9]*\)".*/\1/p' | head -1)
[[ $ann =~ ^[0-9]+$ ]] && ((ann > 0)) || fail "Node capacity annotation '$ann' (nodevold says $free free)"

step "WaitForFirstConsumer: provisioned once a pod is scheduled"
claim later nv-wait 32Mi
# The PV controller has looked at it and waits for a consumer; the
# provisioner is never asked before a node is selected.
wait_event later WaitForFirstConsumer >/dev/null
[[ $(k get pvc later -o jsonpath='{.status.phase}') == Pending ]] || fail "WFFC claim bound before any pod"
[[ -z $(k get pvc later -o jsonpath='{.metadata.annotations.volume\.kubernetes\.io/selected-node}') ]] || fail "WFFC claim has a selected node before any pod"
claim_pod use-later later 'echo waited > /data/f && sleep 3600' | k apply -f - >/dev/null
k wait --for=condition=Ready pod/use-later --timeout=180s >/dev/null || prov_fail "pod use-later not Ready"
[[ $(k get pvc later -o jsonpath='{.metadata.annotations.volume\.kubernetes\.io/selected-node}') == "$K8S_NODE" ]] \
  || fail "claim later has no selected-node"

step "expansion: claim grown while its pod runs"
k patch pvc later --type=merge -p '{"spec":{"resources":{"requests":{"storage":"48Mi"}}}}' >/dev/null || fail "patch claim later"
lpv=$(k get pvc later -o jsonpath='{.spec.volumeName}')
for _ in $(seq 60); do [[ $(k get pv "$lpv" -o jsonpath='{.spec.capacity.storage}') == 48Mi ]] && break; sleep 0.5; done
[[ $(k get pv "$lpv" -o jsonpath='{.spec.capacity.storage}') == 48Mi ]] || prov_fail "PV $lpv capacity not grown"
ctl -o json volume get "$lpv" | grep -q '"size_bytes": "50331648"' || fail "nodevold's volume $lpv not 48Mi"
# kubelet's expandfs (through nodevol-flex) then records it in the claim's status.
for _ in $(seq 180); do [[ $(k get pvc later -o jsonpath='{.status.capacity.storage}') == 48Mi ]] && break; sleep 0.5; done
[[ $(k get pvc later -o jsonpath='{.status.capacity.storage}') == 48Mi ]] \
  || fail "claim status capacity $(k get pvc later -o jsonpath='{.status.capacity.storage}'), kubelet did not finish the resize"
wait_event later VolumeResizeSuccessful >/dev/null

step "reclaim Delete: claim deleted -> volume and PV gone"
k delete pod use-now --wait=true --timeout=60s >/dev/null
k delete pvc now --wait=true --timeout=60s >/dev/null
for _ in $(seq 120); do k get pv "$pv" >/dev/null 2>&1 || break; sleep 0.5; done
! k get pv "$pv" >/dev/null 2>&1 || prov_fail "PV $pv still there: $(k get pv "$pv" -o jsonpath='{.status.phase} {.metadata.finalizers}')"
! ctl volume get "$pv" >/dev/null 2>&1 || fail "volume $pv still on the node"

step "reclaim Retain: claim deleted -> PV Released, volume kept"
claim keep nv-keep 16Mi
bound keep || prov_fail "claim keep not Bound"
kpv=$(k get pvc keep -o jsonpath='{.spec.volumeName}')
k delete pvc keep --wait=true --timeout=60s >/dev/null
k wait --for=jsonpath='{.status.phase}'=Released "pv/$kpv" --timeout=60s >/dev/null || fail "PV $kpv not Released"
# A claim of a Delete class released after it: once the provisioner has
# deleted that one's volume, it has seen keep's Released PV too.
claim after-keep nv-now 16Mi
bound after-keep || prov_fail "claim after-keep not Bound"
apv=$(k get pvc after-keep -o jsonpath='{.spec.volumeName}')
k delete pvc after-keep --wait=true --timeout=60s >/dev/null
for _ in $(seq 120); do k get pv "$apv" >/dev/null 2>&1 || break; sleep 0.5; done
! k get pv "$apv" >/dev/null 2>&1 || prov_fail "PV $apv (reclaim Delete, released after $kpv) still there"
ctl volume get "$kpv" >/dev/null || fail "Retain: volume $kpv deleted"
k get pv "$kpv" >/dev/null || fail "Retain: PV $kpv deleted"

step "bad class parameter: one clear event, nothing created"
claim bad nv-bad 16Mi
msg=$(wait_event bad ProvisioningFailed colour)
step "ProvisioningFailed: $msg"
buid=$(k get pvc bad -o jsonpath='{.metadata.uid}')
! ctl volume get "pvc-$buid" >/dev/null 2>&1 || fail "a volume was created for a bad class"

step "no room: Immediate says why; WaitForFirstConsumer asks the scheduler again"
claim huge nv-now 1000Ti
msg=$(wait_event huge ProvisioningFailed "no node has room")
step "ProvisioningFailed: $msg"
[[ $msg == *"$K8S_NODE:"* ]] || fail "the event does not name the node's figures: $msg"
claim huge-wait nv-wait 1000Ti
claim_pod use-huge huge-wait 'sleep 3600' | k apply -f - >/dev/null
msg=$(wait_event huge-wait ProvisioningFailed "pick another node")
step "ProvisioningFailed: $msg"
[[ $(k get pod use-huge -o jsonpath='{.status.phase}') == Pending ]] || fail "use-huge not Pending"
step "orphan sweep: our Delete volume without claim or PV goes; Retain and foreign ones stay"
orphan() { # NAME RECLAIM [PROVISIONER]
  ctl volume create "$1" --pool default --size 1Mi --param "nodevol.io/provisioner=${3:-nodevol.io}" \
    --param "nodevol.io/reclaim-policy=$2" --param nodevol.io/pvc-namespace=default \
    --param nodevol.io/pvc-name=gone >/dev/null || fail "volume create $1"
}
orphan pvc-00000000-0000-0000-0000-00000000dead Delete
orphan pvc-00000000-0000-0000-0000-00000000beef Retain
orphan pvc-00000000-0000-0000-0000-00000000f00d Delete other.io/provisioner
orphan pvc-00000000-0000-0000-0000-00000000cafe Delete nodevol.io/provisioner  # made before the rename
for _ in $(seq 40); do ctl volume get pvc-00000000-0000-0000-0000-00000000dead >/dev/null 2>&1 || break; sleep 0.5; done
! ctl volume get pvc-00000000-0000-0000-0000-00000000dead >/dev/null 2>&1 || prov_fail "orphan not swept"
for _ in $(seq 40); do ctl volume get pvc-00000000-0000-0000-0000-00000000cafe >/dev/null 2>&1 || break; sleep 0.5; done
! ctl volume get pvc-00000000-0000-0000-0000-00000000cafe >/dev/null 2>&1 || prov_fail "orphan of the old provisioner name not swept"
ctl volume get pvc-00000000-0000-0000-0000-00000000beef >/dev/null || fail "Retain orphan deleted"
ctl volume get pvc-00000000-0000-0000-0000-00000000f00d >/dev/null || fail "another provisioner's volume deleted"
ctl volume get "$(k get pvc later -o jsonpath='{.spec.volumeName}')" >/dev/null || fail "the sweep deleted a bound volume"

step "metrics and probes"
scrape() { ip netns exec "$K8S_NETNS" curl -sf "http://127.0.0.1:${2:-9810}/$1"; }
scrape healthz >/dev/null || fail "/healthz does not answer"
scrape readyz >/dev/null || fail "/readyz not ready"
m=$(scrape metrics) || fail "/metrics does not answer"
grep -qE '^controller_persistentvolumeclaim_provision_total\{class="nv-now"[^}]*\} [1-9]' <<<"$m" \
  || fail "no successful provisions counted for nv-now: $(grep provision_total <<<"$m")"
grep -qE '^controller_persistentvolume_delete_total\{class="nv-now"\} [1-9]' <<<"$m" \
  || fail "no deletions counted: $(grep delete_total <<<"$m")"
grep -qE '^nodevol_provisioner_nodes\{state="reachable"\} 1' <<<"$m" || fail "registry gauge: $(grep provisioner_nodes <<<"$m")"
grep -qE '^nodevol_provisioner_leader 1' <<<"$m" || fail "leader gauge"

step "leader election: a second replica waits; the leader killed -9, it takes over"
grep -q "leading as" "$K8S_WORK/logs/provisioner.log" || prov_fail "the provisioner never led"
holder=$(k get lease nodevol.io-provisioner -o jsonpath='{.spec.holderIdentity}') || fail "no Lease nodevol.io-provisioner"
start_replica() { # LOG
  nsenter --net="/run/netns/$K8S_NETNS" "$NODEVOL_PROVISIONER" --kubeconfig="$K8S_WORK/admin.kubeconfig" \
    --tls-ca="$tls/ca.crt" --tls-cert="$tls/provisioner.crt" --tls-key="$tls/provisioner.key" \
    --metrics-address=127.0.0.1:9811 --log-level=debug >"$K8S_WORK/logs/$1" 2>&1 &
}
start_replica provisioner-b.log
B_PID=$!
CLEANUP_PIDS+=("$B_PID")
# The check below means something only once b has read the Lease and
# deferred to its holder: wait for that line, not a fixed time.
for _ in $(seq 120); do grep -qF "is led by \"$holder\"" "$K8S_WORK/logs/provisioner-b.log" && break; sleep 0.5; done
grep -qF "is led by \"$holder\"" "$K8S_WORK/logs/provisioner-b.log" ||
  fail "replica b never reported the lease held by $holder: $(tail -5 "$K8S_WORK/logs/provisioner-b.log")"
! grep -q "leading as" "$K8S_WORK/logs/provisioner-b.log" || fail "two leaders: replica b leads while $holder holds the lease"
scrape readyz 9811 >/dev/null || fail "a standby replica must be ready"
scrape metrics 9811 | grep -qE '^nodevol_provisioner_leader 0' || fail "standby's leader gauge is not 0"
kill -9 "$PROV_PID"
t0=$SECONDS
claim failover nv-now 8Mi
# The lease (15 s) must run out by b's own clock before it takes over.
bound failover 90 || { tail -20 "$K8S_WORK/logs/provisioner-b.log" >&2; fail "claim not provisioned after the leader died"; }
step "claim bound $((SECONDS - t0)) s after the leader was killed"
failed=$(k get events --field-selector involvedObject.name=failover,reason=ProvisioningFailed \
  -o jsonpath='{range .items[*]}{.message}{"\n"}{end}') || fail "could not list the events of claim failover"
[[ -z $failed ]] || fail "the new leader failed claim failover before it made it: $failed"
grep -q "leading as" "$K8S_WORK/logs/provisioner-b.log" || fail "replica b did not lead"
[[ $(k get lease nodevol.io-provisioner -o jsonpath='{.spec.holderIdentity}') != "$holder" ]] || fail "lease still held by $holder"
step "PASS"
