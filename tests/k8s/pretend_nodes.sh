# Pretend nodes for the provisioner's multi-node tests (sourced after
# lib.sh, under tests/k8s/cluster-up). A pretend node is a Node object with
# no kubelet behind it: an InternalIP added inside the cluster's network
# namespace, a nodevold of its own on that address (own state dir, socket,
# pods root, and a dir pool on a tmpfs of its own size, so every node
# reports a different free space), a certificate naming the node from one
# test CA, and a Lease in kube-node-lease renewed in the background so the
# node lifecycle controller never marks it unreachable (nodes report
# health through the Lease: node-monitor-grace-period, 50 s, counts from
# the last renewal). The scheduler places pods on it; they never run,
# which is all WaitForFirstConsumer needs (selected-node, then a bound PV).
#
# The real kubelet node is cordoned: only pretend nodes take pods here.
# Needs NODEVOL_PROVISIONER besides what lib.sh needs.
: "${NODEVOL_PROVISIONER:?}"
PN_TLS=$K8S_WORK/tls
PN_DIR=$K8S_WORK/pretend
PN_NAMES=()
declare -A PN_IP PN_PID
in_ns() { nsenter --net="/run/netns/$K8S_NETNS" "$@"; }

# pn_fail MESSAGE: fail, with the provisioner logs' and pretend nodevolds' tails.
pn_fail() {
  local f
  for f in "$K8S_WORK"/logs/prov*.log "$PN_DIR"/*/nodevold.log; do
    [[ -f $f ]] || continue
    echo "---- $f (tail)" >&2
    tail -15 "$f" >&2
  done
  # Placement disagreements are the usual cause of a reschedule.
  grep -h "extender had promised\|cannot take the volume" "$K8S_WORK"/logs/prov*.log 2>/dev/null | head -10 >&2 || true
  fail "$@"
}

# Pods bound to pretend nodes never get a kubelet's confirmation: delete
# them by force before lib.sh's cleanup waits for graceful deletions.
pn_cleanup() {
  k delete pods --all --grace-period=0 --force >/dev/null 2>&1 || true
  cleanup
}
trap pn_cleanup EXIT

# pn_init: the CA and the provisioner's client certificate (lib.sh
# make_tls), the real node cordoned, the Lease renewer started.
pn_init() {
  make_tls "$PN_TLS" "$K8S_NODE"
  mkdir -p "$PN_DIR"
  k cordon "$K8S_NODE" >/dev/null || fail "cordon $K8S_NODE"
  pn_renew_loop &
  CLEANUP_PIDS+=("$!")
}

# pn_cert NAME [SAN [USAGE]]: a certificate signed by the CA make_tls made,
# $PN_TLS/NAME.{crt,key}; by default a server certificate naming node NAME
# (subjectAltName DNS:NAME, extendedKeyUsage serverAuth).
pn_cert() { sign_cert "$PN_TLS" "$1" "${2:-DNS:$1}" "${3:-serverAuth}"; }

now_micro() { date -u +%Y-%m-%dT%H:%M:%S.%6NZ; }

# pn_api METHOD PATH [JSON]: one apiserver request with the admin
# certificate (curl: far cheaper than a kubectl process every few seconds).
pn_api() {
  local args=(-sf --max-time 5 --cacert "$K8S_WORK/pki/ca.crt" --cert "$K8S_WORK/pki/admin.crt"
    --key "$K8S_WORK/pki/admin.key" -X "$1")
  [[ -n ${3:-} ]] && args+=(-H 'Content-Type: application/merge-patch+json' -d "$3")
  in_ns curl "${args[@]}" "https://127.0.0.1:6443$2"
}

# Every 5 s, each pretend node's Lease renewed (names from $PN_DIR, so
# nodes added later are included). Failures (apiserver restarting) are
# retried on the next round.
pn_renew_loop() {
  trap - EXIT
  local d
  while :; do
    for d in "$PN_DIR"/*/; do
      [[ -f $d/renew ]] || continue
      pn_api PATCH "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/$(basename "$d")" \
        "{\"spec\":{\"renewTime\":\"$(now_micro)\"}}" >/dev/null 2>&1 || true
    done
    sleep 5
  done
}

# pn_add NAME IP POOL_SIZE: the address, the tmpfs pool, the certificate,
# nodevold, then the Node, labelled nodevol.io/node=true and, as a cluster
# admin marks the nodes that may serve volumes, a storage node
# (pn_node_object).
pn_add() {
  local n=$1 ip=$2 size=$3 d=$PN_DIR/$1
  PN_NAMES+=("$n")
  PN_IP[$n]=$ip
  mkdir -p "$d/state" "$d/pool" "$d/pods"
  : >"$d/nodevold.conf"
  in_ns ip addr add "$ip/32" dev lo || fail "address $ip"
  # Its own filesystem: the dir pool's capacity is the filesystem's free space.
  mount -t tmpfs -o "size=$size,mode=0755" "nvpn-$n" "$d/pool" || fail "tmpfs for $n"
  # PN_STATE_TMPFS=1 (benchmarks only): the state directory on a tmpfs too,
  # so the node's durable record writes cost next to nothing here; a real
  # cluster pays them on the node, not beside its control plane.
  if [[ ${PN_STATE_TMPFS:-0} == 1 ]]; then
    mount -t tmpfs -o "size=64m,mode=0700" "nvst-$n" "$d/state" || fail "state tmpfs for $n"
  fi
  pn_cert "$n"
  pn_nodevold_start "$n"
  pn_node_object "$n" "$ip" ', nodevol.io/node: "true", node-restriction.kubernetes.io/nodevol-storage: "true"'
}

# pn_node_object NAME IP [LABELS]: the Node (Ready, with allocatable
# cpu/memory/pods: PN_MAX_PODS, default 110 as kubelet; LABELS, e.g.
# ', a: "b"', after the standard ones) and its Lease, renewed from now on.
pn_node_object() {
  local n=$1 ip=$2 labels=${3:-} d=$PN_DIR/$1 t
  mkdir -p "$d"
  t=$(now_micro)
  k create -f - >/dev/null <<YAML || fail "create node $n"
apiVersion: v1
kind: Node
metadata:
  name: $n
  labels: {kubernetes.io/hostname: $n, kubernetes.io/os: linux, kubernetes.io/arch: amd64$labels}
YAML
  k patch node "$n" --subresource=status --type=merge -p "$(cat <<JSON
{"status": {
  "addresses": [{"type": "InternalIP", "address": "$ip"}, {"type": "Hostname", "address": "$n"}],
  "capacity": {"cpu": "8", "memory": "16Gi", "pods": "${PN_MAX_PODS:-110}"},
  "allocatable": {"cpu": "8", "memory": "16Gi", "pods": "${PN_MAX_PODS:-110}"},
  "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "pretend node (no kubelet)",
                  "lastHeartbeatTime": "${t%.*}Z", "lastTransitionTime": "${t%.*}Z"}],
  "nodeInfo": {"kubeletVersion": "$K8S_VERSION_PINNED", "operatingSystem": "linux", "architecture": "amd64",
               "machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "", "osImage": "",
               "containerRuntimeVersion": "", "kubeProxyVersion": ""}}}
JSON
)" >/dev/null || fail "status of node $n"
  k create -f - >/dev/null <<YAML || fail "lease of node $n"
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: $n, namespace: kube-node-lease}
spec: {holderIdentity: $n, leaseDurationSeconds: 40, renewTime: "$t"}
YAML
  : >"$d/renew"
}

# pn_nodevold_start NAME: (re)starts NAME's nodevold, same state and pool.
# PN_LOG_LEVEL: its --log-level, debug unless set (benchmarks: info, a node's
# default, so that the nodes' CPU is what a node spends).
pn_nodevold_start() {
  local n=$1 d=$PN_DIR/$1
  # nsenter --net only: its mounts stay in the host's mount namespace.
  # nsenter itself, not in_ns: $! must be the daemon's pid (nsenter execs it).
  nsenter --net="/run/netns/$K8S_NETNS" "$NODEVOLD" --config="$d/nodevold.conf" --socket="$d/nodevold.sock" --state-dir="$d/state" \
    --pods-root="$d/pods" --node-name="$n" --pool="name=default,backend=dir,path=$d/pool" \
    --tls-listen="${PN_IP[$n]}:9809" --tls-ca="$PN_TLS/ca.crt" --tls-cert="$PN_TLS/$n.crt" --tls-key="$PN_TLS/$n.key" \
    --metrics-address=off --log-target=stderr --log-level="${PN_LOG_LEVEL:-debug}" >>"$d/nodevold.log" 2>&1 &
  PN_PID[$n]=$!
  CLEANUP_PIDS+=("$!")
  for _ in $(seq 100); do pn_ctl "$n" info >/dev/null 2>&1 && return 0; sleep 0.1; done
  pn_fail "nodevold of $n did not start"
}

# pn_nodevold_stop NAME [SIGNAL]
pn_nodevold_stop() {
  kill "-${2:-TERM}" "${PN_PID[$1]}" 2>/dev/null || true
  wait "${PN_PID[$1]}" 2>/dev/null || true
}

pn_ctl() { local n=$1; shift; "$NODEVOLCTL" --socket "$PN_DIR/$n/nodevold.sock" "$@"; }
# pn_volumes NAME: the names of the volumes on NAME's nodevold, one a line.
# Most callers read it inside $(...) for a "nothing left" check, where a
# failed nodevolctl would read as an empty list and pass: a failure fails
# the test instead, by a signal to the test's own shell ($$ names it even
# inside $(...)), which runs pn_fail once the substitution returns.
trap 'pn_fail "nodevolctl could not list the volumes of a pretend node (above); nothing about them is proven"' USR1
pn_volumes() {
  local out
  if ! out=$(pn_ctl "$1" volume list); then
    echo "pn_volumes: nodevolctl volume list failed on $1" >&2
    kill -USR1 $$
    return 1
  fi
  tail -n +2 <<<"$out" | awk '{ print $1 }'
}
# pn_free NAME: free bytes of NAME's pool "default", as nodevold reports them.
pn_free() { pn_ctl "$1" -o json capacity default | sed -n 's/.*"free_bytes": *"\([0-9]*\)".*/\1/p' | head -1; }

# prov_start LOG [ARGS...]: nodevol-provisioner out of cluster (admin
# kubeconfig, or PROV_KUBECONFIG) in the namespace, log appended to
# logs/LOG.log; pid in PROV_PID, log in PROV_LOG, where this run's lines
# start in PROV_OFF.
prov_start() {
  local log=$1 a metrics=--metrics-address=off; shift
  for a in "$@"; do [[ $a == --metrics-address=* ]] && metrics=; done
  PROV_LOG=$K8S_WORK/logs/$log.log
  PROV_OFF=$(($(stat -c %s "$PROV_LOG" 2>/dev/null || echo 0) + 1))
  nsenter --net="/run/netns/$K8S_NETNS" "$NODEVOL_PROVISIONER" \
    --kubeconfig="${PROV_KUBECONFIG:-$K8S_WORK/admin.kubeconfig}" \
    --tls-ca="$PN_TLS/ca.crt" --tls-cert="$PN_TLS/provisioner.crt" --tls-key="$PN_TLS/provisioner.key" \
    ${metrics:+"$metrics"} "$@" >>"$K8S_WORK/logs/$log.log" 2>&1 &
  PROV_PID=$!
  CLEANUP_PIDS+=("$!")
}

# claims_yaml PREFIX FROM TO CLASS SIZE: PVC documents PREFIX-FROM..PREFIX-TO.
claims_yaml() {
  local i
  for ((i = $2; i <= $3; i++)); do
    cat <<YAML
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $1-$i, labels: {set: $1}}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: $4
  resources: {requests: {storage: $5}}
YAML
  done
}

# pn_counts: "<claims Bound> <PVs nodevol provisioned>".
pn_counts() {
  local b p
  b=$(k get pvc -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -c '^Bound$') || true
  p=$(k get pv -o jsonpath='{range .items[*]}{.metadata.annotations.pv\.kubernetes\.io/provisioned-by}{"\n"}{end}' |
    grep -c '^nodevol.io$') || true
  echo "$b $p"
}

# pv_nodes [SELECTOR...]: "PV NODE" per provisioned PV, NODE from its node
# affinity (kubernetes.io/hostname).
pv_nodes() {
  k get pv "$@" -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]}{"\n"}{end}'
}

# pn_all_volumes: "VOLUME NODE" for every volume on every pretend node, sorted.
pn_all_volumes() { local n; for n in "${PN_NAMES[@]}"; do pn_volumes "$n" | sed "s/\$/ $n/"; done | sort; }
# pn_consistent WANT: WANT claims, each Bound to pvc-<its uid>; exactly WANT
# of our PVs, and the volumes on the nodes exactly those, each on its PV's
# node (none twice, none left over). Leaves the lists in
# $K8S_WORK/pvs.txt and volumes.txt ("NAME NODE" lines).
pn_consistent() {
  local want=$1 c
  c=$(k get pvc -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.uid} {.status.phase} {.spec.volumeName}{"\n"}{end}')
  [[ $(grep -c . <<<"$c") == "$want" ]] || pn_fail "$(grep -c . <<<"$c") claims, expected $want"
  awk '$3 != "Bound" || $4 != "pvc-" $2 { print; bad = 1 } END { exit bad }' <<<"$c" >&2 ||
    pn_fail "claims not Bound to pvc-<their uid> (above)"
  pv_nodes | sort >"$K8S_WORK/pvs.txt"
  [[ $(grep -c . "$K8S_WORK/pvs.txt") == "$want" ]] || pn_fail "$(grep -c . "$K8S_WORK/pvs.txt") PVs, expected $want"
  pn_all_volumes >"$K8S_WORK/volumes.txt"
  [[ $(grep -c . "$K8S_WORK/volumes.txt") == "$want" ]] ||
    pn_fail "$(grep -c . "$K8S_WORK/volumes.txt") volumes on the nodes, expected $want: $(diff "$K8S_WORK/pvs.txt" "$K8S_WORK/volumes.txt" | head)"
  diff "$K8S_WORK/pvs.txt" "$K8S_WORK/volumes.txt" >&2 ||
    pn_fail "volumes on the nodes differ from the PVs (above: < PV, > volume)"
}

# our_events NAME: reasons of events about NAME that nodevol-provisioner recorded.
our_events() {
  k get events --all-namespaces --field-selector "involvedObject.name=$1" \
    -o jsonpath='{range .items[*]}{.source.component}{.reportingComponent} {.reason}{"\n"}{end}' |
    awk '$1 ~ /nodevol/ { print $2 }'
}

# elapsed T0: seconds since T0 (from `date +%s.%N`), two decimals.
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'; }

# prov_wait_nodes: until the provisioner started last has reached every
# pretend node's nodevold (its log says so), 60 s.
prov_wait_nodes() {
  local n
  for n in "${PN_NAMES[@]}"; do
    for _ in $(seq 120); do
      grep -q "node $n (.*) reachable" <(tail -c "+$PROV_OFF" "$PROV_LOG") && continue 2
      sleep 0.5
    done
    pn_fail "the provisioner never reached $n's nodevold"
  done
}

# prov_replica ID [ARGS...]: a replica (its Lease identity its own default,
# host name and a random suffix, new at every start), log appended to
# logs/prov-ID.log, restarted 1 s after it exits (as its pod would be: a
# replica that loses the Lease exits); its current pid in $K8S_WORK/prov-ID.pid,
# the supervising loop's in REPLICA_PID[ID] (SIGTERM to it stops both).
prov_replica() {
  local id=$1; shift
  (
    trap - EXIT
    trap 'kill "$(cat "$K8S_WORK/prov-$id.pid")" 2>/dev/null; exit 0' TERM
    while :; do
      nsenter --net="/run/netns/$K8S_NETNS" "$NODEVOL_PROVISIONER" --kubeconfig="$K8S_WORK/admin.kubeconfig" \
        --tls-ca="$PN_TLS/ca.crt" --tls-cert="$PN_TLS/provisioner.crt" --tls-key="$PN_TLS/provisioner.key" \
        --metrics-address=off "$@" >>"$K8S_WORK/logs/prov-$id.log" 2>&1 &
      echo $! >"$K8S_WORK/prov-$id.pid"
      rc=0
      wait $! || rc=$?
      echo "==== [test] replica $id exited (status $rc); restarting in 1 s" >>"$K8S_WORK/logs/prov-$id.log"
      sleep 1
    done
  ) 2>>"$K8S_WORK/logs/prov-$id.log" &
  REPLICA_PID[$id]=$!
  CLEANUP_PIDS+=("$!")
}
declare -A REPLICA_PID
lease_holder() { k get lease nodevol.io-provisioner -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true; }
# leader: the replica (a or b) whose log says it leads as the Lease's holder.
leader() {
  local h id
  h=$(lease_holder)
  [[ -n $h ]] || return 1
  for id in a b; do grep -qF "leading as $h " "$K8S_WORK/logs/prov-$id.log" 2>/dev/null && { echo "$id"; return 0; }; done
  return 1
}

# pn_check_ready: every pretend node still Ready=True and untainted (the node
# lifecycle controller marks a node whose Lease went stale for 50 s Unknown
# and taints it unreachable); call it after the test has run longer than that.
pn_check_ready() {
  local n r t
  for n in "${PN_NAMES[@]}"; do
    r=$(k get node "$n" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')
    t=$(k get node "$n" -o jsonpath='{.spec.taints[*].key}')
    [[ $r == True && -z $t ]] || fail "pretend node $n: Ready=$r, taints '$t' (its Lease not renewed?)"
  done
}
