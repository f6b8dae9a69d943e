#!/usr/bin/env bash
# Under the real control plane and kubelet (run by cluster-up): deploy/ run
# as pods, the way an operator installs it.
#  - the image: packaging/image/build-oci from this build's
#    nodevol-provisioner, imported into the node's containerd;
#  - deploy/extender (deploy/base plus the scheduler extender) through
#    kustomize (kubectl kustomize), changed only by a test overlay: the
#    image tag, imagePullPolicy Never, and the apiserver's address (below);
#    the extender's TLS Secret as docs/scheduling.md makes it, from lib.sh's
#    make_tls; nodevold enrolling as the node (kubelet's kubeconfig), so
#    the provisioner pods sign its certificate and issue their own;
#    deploy/examples' dir classes.
# Checked:
#  - both replicas Running and Ready (the liveness and readiness probes
#    pass; no Warning event in the namespace), each container running as
#    65532:65532, no capabilities, no new privileges, seccomp filtering, on
#    a read-only root filesystem;
#  - exactly one replica leads: the Lease names it, and only its
#    nodevol_provisioner_leader gauge is 1;
#  - a claim of nodevol-dir is Bound to a PV provisioned by
#    nodevol.io, and a pod writes into the volume on the node;
#  - the extender: only the leader's pod is labelled
#    nodevol.io/extender=serving and is the Service nodevol-extender's
#    endpoint; it answers a filter over mutual TLS, the standby does not
#    listen, a client without a certificate gets nothing;
#  - the leader pod deleted (--force): another live replica takes the
#    Lease (the standby, or the ReplicaSet's replacement if it asks first),
#    the label and the Service follow it, and a second claim is Bound;
#  - the new leader deleted gracefully: its log says it released the Lease
#    (the time from SIGTERM is printed), another live replica leads;
#  - the first claim deleted: its PV and its volume are gone;
#  - no "Forbidden" in either replica's log.
# Needs NODEVOL_PROVISIONER (path) besides what lib.sh needs.
K8S_TEST=deploy_pods
source "$(dirname "$0")/lib.sh"
: "${NODEVOL_PROVISIONER:?}"
repo=$(cd "$(dirname "$0")/../.." && pwd)
deploy=${DEPLOY_DIR:-$repo/deploy}
NS=nodevol-system
tag=test
image=registry.local/nodevol/provisioner
tls=$K8S_WORK/tls
make_tls "$tls" "$K8S_NODE"
node_ip=$(k get node "$K8S_NODE" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
kn() { k -n "$NS" "$@"; }

step "image: build-oci, imported into the node's containerd"
provisioner_image "$tag"

step "nodevold: dir pool \"default\", enrolling as the node on $node_ip:9809"
nodevold_start --enroll=on --enroll-kubeconfig="$K8S_WORK/kubelet.kubeconfig" --tls-listen="$node_ip:9809"

step "the namespace and the extender's Secret as docs/scheduling.md makes it"
k apply -f "$deploy/base/namespace.yaml" >/dev/null || fail "apply namespace.yaml"
SVC=nodevol-extender.$NS.svc
sign_cert "$tls" extender "DNS:$SVC" serverAuth
sign_cert "$tls" scheduler DNS:kube-scheduler clientAuth
kn create secret generic nodevol-extender-tls --from-file=ca.crt="$tls/ca.crt" \
  --from-file=tls.crt="$tls/extender.crt" --from-file=tls.key="$tls/extender.key" >/dev/null \
  || fail "creating the extender's Secret"

step "deploy/extender through kustomize, with the test overlay"
overlay=$K8S_WORK/deploy-pods
mkdir -p "$overlay"
# Test-only: this harness runs no kube-proxy, so the in-cluster address of
# the kubernetes Service (10.0.0.1, which kubelet puts in
# KUBERNETES_SERVICE_HOST) leads nowhere. The pods are given the
# apiserver's own address instead; a real cluster needs no such patch.
cat >"$overlay/kustomization.yaml" <<YAML
resources: [$(realpath --relative-to="$overlay" "$deploy/extender")]
images:
- {name: $image, newTag: $tag}
patches:
- target: {kind: Deployment, name: nodevol-provisioner}
  patch: |-
    - op: replace
      path: /spec/template/spec/containers/0/imagePullPolicy
      value: Never
    - op: add
      path: /spec/template/spec/containers/0/env/-
      value: {name: KUBERNETES_SERVICE_HOST, value: "$node_ip"}
    - op: add
      path: /spec/template/spec/containers/0/env/-
      value: {name: KUBERNETES_SERVICE_PORT, value: "6443"}
YAML
k kustomize "$overlay" >"$overlay/rendered.yaml" || fail "kubectl kustomize of the overlay"
grep -q "image: $image:$tag" "$overlay/rendered.yaml" || fail "the overlay did not set the image"
k apply -f "$overlay/rendered.yaml" >/dev/null 2>"$K8S_WORK/logs/apply.err" || { cat "$K8S_WORK/logs/apply.err" >&2; fail "apply deploy/extender"; }
# deploy/README.md's steps, followed as written, draw no warning.
! grep -i warning "$K8S_WORK/logs/apply.err" >&2 || fail "kubectl apply warned (above)"

# pods: the provisioner pods, name per line, those not being deleted.
pods() {
  kn get pods -l app.kubernetes.io/name=nodevol-provisioner \
    -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.deletionTimestamp}{"\n"}{end}' | awk 'NF == 1 { print $1 }'
}
plogs() {
  local p
  for p in $(pods); do echo "---- $p" >&2; kn logs "$p" --tail=30 >&2 || true; done
  kn describe pods >&2 || true
}
# The reason first: the pods' logs and descriptions are long, and a
# shortened CI log keeps the head.
pfail() { echo "FAIL: $*" >&2; plogs; fail "$@"; }
# ready2: two pods, both Running and Ready.
ready2() {
  local names n=0 p
  names=$(pods)
  for p in $names; do
    [[ $(kn get pod "$p" -o jsonpath='{.status.phase}/{.status.conditions[?(@.type=="Ready")].status}') == Running/True ]] || return 1
    n=$((n + 1))
  done
  ((n == 2))
}
wait_ready2() {
  for _ in $(seq "$((${1:-180} * 2))"); do ready2 && return 0; sleep 0.5; done
  return 1
}

step "both replicas Running and Ready (probes pass)"
wait_ready2 180 || pfail "the Deployment's two pods are not Running and Ready"
kn rollout status deploy/nodevol-provisioner --timeout=60s >/dev/null || pfail "rollout not complete"

step "each container: 65532:65532, no capabilities, no new privileges, seccomp, read-only root"
for p in $(pods); do
  cid=$(kn get pod "$p" -o jsonpath='{.status.containerStatuses[0].containerID}')
  cid=${cid#containerd://}
  pid=$(ctr_ task ls | awk -v c="$cid" '$1 == c { print $2 }')
  [[ $pid =~ ^[0-9]+$ ]] || fail "no task for container $cid of pod $p"
  st=/proc/$pid/status
  [[ $(awk '/^Uid:/ { print $2, $3, $4, $5 }' "$st") == "65532 65532 65532 65532" ]] || fail "$p runs as uid $(grep ^Uid: "$st")"
  [[ $(awk '/^Gid:/ { print $2, $3, $4, $5 }' "$st") == "65532 65532 65532 65532" ]] || fail "$p runs as gid $(grep ^Gid: "$st")"
  [[ $(awk '/^CapEff:/ { print $2 }' "$st") == 0000000000000000 ]] || fail "$p has capabilities: $(grep ^CapEff: "$st")"
  [[ $(awk '/^NoNewPrivs:/ { print $2 }' "$st") == 1 ]] || fail "$p may gain privileges"
  [[ $(awk '/^Seccomp:/ { print $2 }' "$st") == 2 ]] || fail "$p has no seccomp filter: $(grep ^Seccomp: "$st")"
  [[ $(tr -d '\0' <"/proc/$pid/cmdline" | head -c 100) == /usr/bin/nodevol-provisioner* ]] || fail "$p runs $(tr '\0' ' ' <"/proc/$pid/cmdline")"
  rootopts=$(awk '$5 == "/" { print $6 }' "/proc/$pid/mountinfo" | tail -1)
  [[ $rootopts == ro || $rootopts == ro,* ]] || fail "$p's root filesystem is mounted '$rootopts', want ro"
  step "$p: pid $pid, $(awk '/^VmRSS:/ { print $2 / 1024 " MiB resident" }' "$st") (request 64Mi, limit 512Mi)"
done

# holder: the Lease's holder identity (<pod name>_<random>).
holder() { kn get lease nodevol.io-provisioner -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true; }
# leader_gauge POD: the pod's nodevol_provisioner_leader value.
leader_gauge() {
  local ip
  ip=$(kn get pod "$1" -o jsonpath='{.status.podIP}')
  nsenter --net="/run/netns/$K8S_NETNS" curl -sS -f -m 5 "http://$ip:9810/metrics" |
    awk '$1 == "nodevol_provisioner_leader" { print $2 }'
}

step "exactly one replica leads"
h=
for _ in $(seq 60); do h=$(holder); [[ -n $h ]] && break; sleep 0.5; done
leader=${h%_*}
pods | grep -x -- "$leader" >/dev/null || pfail "the Lease holder '$h' is not one of the pods ($(pods | tr '\n' ' '))"
for _ in $(seq 20); do
  leaders=0
  for p in $(pods); do
    g=$(leader_gauge "$p") || pfail "no /metrics from $p"
    [[ $g == 1 ]] && { leaders=$((leaders + 1)); [[ $p == "$leader" ]] || pfail "$p reports leading, the Lease names $leader"; }
  done
  ((leaders == 1)) && break
  sleep 0.5
done
((leaders == 1)) || pfail "$leaders replicas report nodevol_provisioner_leader 1, want exactly 1"
standby=$(pods | grep -vx -- "$leader")
# No Warning event in the namespace (FailedMount of the Secret, liveness
# failures, back-off...), but MissingClusterDNS (this harness's kubelet has
# no cluster DNS, which the provisioner does not use) and a readiness probe
# refused while the process starts (the Deployment delays the first probe
# by 2 s; a loaded machine may start slower), and kubelet's own informer
# not synced in time on a loaded machine ("failed to sync configmap
# cache: timed out waiting for the condition", retried by kubelet and
# seen once in CI; a missing or misnamed Secret says "not found"), and
# kube-apiserver's ipallocator-repair-controller finding the Service
# nodevol-extender before its IPAddress: the allocator creates the
# IPAddress first, but the repair loop watches Services and IPAddresses
# through two informers, and on a loaded machine the Service's event can
# come first ("Cluster IP [IPv4]: ... is not allocated; repairing", seen
# once in CI; kubernetes' repairip.go, a race inside kube-apiserver that
# no manifest of ours can cause or prevent). Each line is "WHO REASON:
# MESSAGE", WHO the reporting component (the source of an older-style
# event), so an exception names who may say it.
events=$(kn get events --field-selector type=Warning -o json | python3 -c '
import json, sys
for e in json.load(sys.stdin)["items"]:
    who = e.get("reportingComponent") or e.get("source", {}).get("component") or "-"
    print("%s %s: %s" % (who, e.get("reason"), e.get("message", "").rstrip()))') ||
  pfail "could not list the Warning events in $NS"
warnings=$(grep -v -e '^[^ ]* MissingClusterDNS:' -e '^kubelet Unhealthy: Readiness probe failed: .*connection refused' \
    -e '^kubelet FailedMount: .*failed to sync \(configmap\|secret\) cache: timed out waiting for the condition' \
    -e '^ipallocator-repair-controller ClusterIPNotAllocated: Cluster IP \[IPv[46]\]: [0-9a-f.:]* is not allocated; repairing$' <<<"$events" || true)
[[ -z $warnings ]] || pfail "Warning events in $NS: $warnings"
step "leader $leader, standby $standby"

# serving: the pods labelled nodevol.io/extender=serving, and the
# addresses behind the Service nodevol-extender.
serving() { kn get pods -l nodevol.io/extender=serving -o jsonpath='{.items[*].metadata.name}'; }
endpoints() {
  kn get endpointslices -l kubernetes.io/service-name=nodevol-extender \
    -o jsonpath='{range .items[*].endpoints[*]}{.addresses[0]}{" "}{end}' | xargs
}
# filter_at IP [NO_CERT]: POST /filter to IP:9811 as kube-scheduler would
# (its client certificate unless NO_CERT), the server checked against the
# Service's name; prints the HTTP status, or curl's exit code as "curl N".
filter_at() {
  local cert=(--cert "$tls/scheduler.crt" --key "$tls/scheduler.key") rc=0 out
  [[ -n ${2:-} ]] && cert=()
  out=$(nsenter --net="/run/netns/$K8S_NETNS" curl -sS -m 5 -o /dev/null -w '%{http_code}' --cacert "$tls/ca.crt" \
    "${cert[@]}" --resolve "$SVC:9811:$1" -H 'Content-Type: application/json' \
    -d '{"Pod":{"metadata":{"name":"p","namespace":"default"}},"NodeNames":["'"$K8S_NODE"'"]}' \
    "https://$SVC:9811/filter" 2>/dev/null) || rc=$?
  ((rc == 0)) && echo "$out" || echo "curl $rc"
}
# extender_follows LEADER: only LEADER is labelled and behind the Service (60 s).
extender_follows() {
  local ip
  ip=$(kn get pod "$1" -o jsonpath='{.status.podIP}')
  for _ in $(seq 120); do
    [[ $(serving) == "$1" && $(endpoints) == "$ip" ]] && return 0
    sleep 0.5
  done
  pfail "the extender does not follow leader $1 ($ip): labelled '$(serving)', the Service's endpoints '$(endpoints)'"
}

step "the extender: only the leader serves it, behind the Service, over mutual TLS"
extender_follows "$leader"
leader_ip=$(kn get pod "$leader" -o jsonpath='{.status.podIP}')
standby_ip=$(kn get pod "$standby" -o jsonpath='{.status.podIP}')
[[ $(filter_at "$leader_ip") == 200 ]] || pfail "the leader's extender answers $(filter_at "$leader_ip"), want 200"
[[ $(filter_at "$standby_ip") == "curl 7" ]] || pfail "the standby's extender port: $(filter_at "$standby_ip"), want refused (curl 7)"
r=$(filter_at "$leader_ip" no-cert)
[[ $r == "curl "* ]] || pfail "a client without a certificate got HTTP $r from the extender"
step "leader $leader_ip labelled and behind the Service; standby refuses connections; no certificate: $r"

step "a claim of deploy/examples' nodevol-dir is Bound to a provisioned PV; a pod writes to it"
k apply -f "$deploy/examples/storageclass-dir.yaml" >/dev/null || fail "apply the dir classes"
claim c1 nodevol-dir 16Mi
bound c1 90 || pfail "claim c1 not Bound"
pv1=$(k get pvc c1 -o jsonpath='{.spec.volumeName}')
[[ $pv1 == "pvc-$(k get pvc c1 -o jsonpath='{.metadata.uid}')" ]] || fail "claim c1 bound to '$pv1'"
[[ $(k get pv "$pv1" -o jsonpath='{.metadata.annotations.pv\.kubernetes\.io/provisioned-by}') == nodevol.io ]] \
  || fail "PV $pv1 not provisioned by nodevol.io"
ctl volume get "$pv1" >/dev/null || fail "nodevold has no volume $pv1"
claim_pod w1 c1 'echo from-pod > /data/f && sleep 3600' | k apply -f - >/dev/null
k wait --for=condition=Ready pod/w1 --timeout=120s >/dev/null || fail "pod w1 not Ready"
for _ in $(seq 20); do [[ -f $K8S_WORK/nodevold/pool/$pv1/f ]] && break; sleep 0.5; done
[[ $(cat "$K8S_WORK/nodevold/pool/$pv1/f" 2>/dev/null) == from-pod ]] || fail "the pod's file is not in volume $pv1 on the node"

step "capacity objects: one per nodevol.io class on the node, with room, owned by the Deployment"
# csis: "class hostname capacity owner-kind/owner-name" per object.
csis() {
  kn get csistoragecapacities -o jsonpath='{range .items[*]}{.storageClassName} {.nodeTopology.matchLabels.kubernetes\.io/hostname} {.capacity} {.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}{"\n"}{end}'
}
host=$(k get node "$K8S_NODE" -o jsonpath='{.metadata.labels.kubernetes\.io/hostname}')
line=
for _ in $(seq 40); do
  line=$(csis | awk -v h="$host" '$1 == "nodevol-dir" && $2 == h')
  [[ -n $line ]] && break; sleep 0.5
done
read -r _ _ cap owner <<<"$line"
[[ -n $line && $owner == Deployment/nodevol-provisioner ]] || pfail "no CSIStorageCapacity for nodevol-dir on $host owned by the Deployment: $(csis)"
cap_bytes=$(numfmt --from=iec-i "$cap" 2>/dev/null || echo "$cap")
((cap_bytes > 0)) || pfail "nodevol-dir on $host: capacity '$cap'"

step "the leader pod deleted (--force): another replica takes the Lease"
# Its log, followed until the container ends (the pod object goes at once).
kn logs -f "$leader" >"$K8S_WORK/logs/first-leader.log" 2>&1 &
follow=$!
sleep 1
kn delete pod "$leader" --grace-period=0 --force >/dev/null 2>&1 || fail "deleting $leader"
h=
for _ in $(seq 120); do
  h=$(holder)
  [[ -n $h && ${h%_*} != "$leader" ]] && break
  sleep 0.5
done
# The standby usually wins; the ReplicaSet's replacement pod competes for
# the released Lease too (both retry every 2 s, as client-go's candidates
# do), so either may: what matters is that a live replica leads.
pods | grep -x -- "${h%_*}" >/dev/null && [[ ${h%_*} != "$leader" ]] ||
  pfail "after $leader went, the Lease is held by '$h', want one of $(pods | tr '\n' ' ')"
step "now led by ${h%_*}$([[ ${h%_*} == "$standby" ]] && echo ' (the standby)' || echo ' (the replacement pod)')"
extender_follows "${h%_*}"
[[ $(filter_at "$(kn get pod "${h%_*}" -o jsonpath='{.status.podIP}')") == 200 ]] || pfail "the new leader's extender does not answer"
step "the extender's label and the Service followed it"
wait "$follow" || true
step "$leader's last words: $(tail -1 "$K8S_WORK/logs/first-leader.log")"
claim c2 nodevol-dir 16Mi
bound c2 90 || pfail "claim c2 not Bound after the takeover"
wait_ready2 180 || pfail "the Deployment did not come back to two Ready pods"

step "the new leader deleted gracefully (SIGTERM, 30 s grace): it releases the Lease, another replica leads"
h=$(holder); leader2=${h%_*}
kn logs -f "$leader2" >"$K8S_WORK/logs/second-leader.log" 2>&1 &
follow=$!
sleep 1
kn delete pod "$leader2" --wait=false >/dev/null || fail "deleting $leader2"
wait "$follow" || true
# The elector logs "released the lease" only once the apiserver took the
# release, and a warning "releasing ... failed" otherwise.
grep -q "released the lease" "$K8S_WORK/logs/second-leader.log" &&
  ! grep -q "releasing .* failed" "$K8S_WORK/logs/second-leader.log" ||
  pfail "$leader2 did not release the Lease on SIGTERM: $(tail -3 "$K8S_WORK/logs/second-leader.log")"
t_sig=$(sed -n 's/^\[[0-9-]* \([0-9:.]*\)\].*signal 15: stopping.*/\1/p' "$K8S_WORK/logs/second-leader.log")
t_rel=$(sed -n 's/^\[[0-9-]* \([0-9:.]*\)\].*released the lease.*/\1/p' "$K8S_WORK/logs/second-leader.log")
step "$leader2: SIGTERM at $t_sig, Lease released at $t_rel"
for _ in $(seq 120); do
  h=$(holder)
  [[ -n $h && ${h%_*} != "$leader2" ]] && pods | grep -x -- "${h%_*}" >/dev/null && break
  sleep 0.5
done
[[ -n $h && ${h%_*} != "$leader2" ]] && pods | grep -x -- "${h%_*}" >/dev/null ||
  pfail "after $leader2 went, the Lease is held by '$h', want one of $(pods | tr '\n' ' ')"
step "now led by ${h%_*}"
wait_ready2 180 || pfail "the Deployment did not come back to two Ready pods"

step "claim c1 deleted: PV and volume gone"
k delete pod w1 --grace-period=1 --wait=true --timeout=60s >/dev/null
k delete pvc c1 --wait=true --timeout=60s >/dev/null
for _ in $(seq 120); do k get pv "$pv1" >/dev/null 2>&1 || break; sleep 0.5; done
! k get pv "$pv1" >/dev/null 2>&1 || pfail "PV $pv1 still there: $(k get pv "$pv1" -o jsonpath='{.status.phase} {.metadata.finalizers}')"
! ctl volume get "$pv1" >/dev/null 2>&1 || fail "volume $pv1 still on the node"
[[ ! -e $K8S_WORK/nodevold/pool/$pv1 ]] || fail "the directory of $pv1 is still in the pool"

step "no Forbidden in the replicas' logs"
refused=$(grep -i forbidden "$K8S_WORK/logs/first-leader.log" | head -3 || true)
[[ -z $refused ]] || pfail "$leader was refused: $refused"
for p in $(pods); do
  refused=$(kn logs "$p" 2>/dev/null | grep -i forbidden | head -3 || true)
  [[ -z $refused ]] || pfail "$p was refused: $refused"
done

step "the Deployment deleted: the garbage collector removes the capacity objects"
[[ -n $(csis) ]] || fail "no capacity objects before the Deployment is deleted"
kn delete deploy nodevol-provisioner --wait=false >/dev/null || fail "deleting the Deployment"
for _ in $(seq 60); do [[ -z $(csis) ]] && break; sleep 1; done
[[ -z $(csis) ]] || fail "capacity objects left after the Deployment went: $(csis)"
step "PASS"
