# Helpers of the scheduling tests (scheduling_test.sh, extender_test.sh):
# sourced after pretend_nodes.sh, with POOL[node] = the node's pool bytes
# and MiB set. Pods and claims of one "set" carry the label set=<SET>.

# pods_yaml PREFIX N SIZES...: N pods PREFIX-i, each with its claim
# PREFIX-i of the next size in SIZES (MiB, cycled), class nv-wait.
pods_yaml() {
  local p=$1 n=$2 i size
  shift 2
  local sizes=("$@")
  for ((i = 0; i < n; i++)); do
    size=${sizes[i % ${#sizes[@]}]}
    cat <<YAML
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $p-$i, labels: {set: $p}}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: nv-wait
  resources: {requests: {storage: ${size}Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: $p-$i, labels: {set: $p}}
spec:
  terminationGracePeriodSeconds: 0
  containers: [{name: c, image: $BUSYBOX_IMAGE, imagePullPolicy: Never, command: [sleep, "3600"],
                volumeMounts: [{name: data, mountPath: /data}]}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: $p-$i}}]
YAML
  done
}

# node_of CLAIM: the node its PV is pinned to.
node_of() {
  k get pv "$(k get pvc "$1" -o jsonpath='{.spec.volumeName}')" \
    -o jsonpath='{.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0]}'
}

# reschedules: ProvisioningFailed events asking the scheduler again, in all.
reschedules() {
  k get events --field-selector reason=ProvisioningFailed -o jsonpath='{range .items[*]}{.count} {.message}{"\n"}{end}' |
    awk '/pick another node/ { n += $1 } END { print n + 0 }'
}

# check_no_overcommit: per node, the sizes of the volumes its nodevold
# holds never exceed its pool.
check_no_overcommit() {
  local n sum
  for n in "${PN_NAMES[@]}"; do
    # (grep finding nothing on a node without volumes must not end the test)
    sum=$(pn_ctl "$n" -o json volume list | { grep -o '"size_bytes": *"[0-9]*"' || true; } |
      { grep -o '[0-9]*' || true; } | awk '{ s += $1 } END { printf "%.0f\n", s }')
    step "  $n: $((sum / MiB)) MiB of volumes in a $((POOL[$n] / MiB)) MiB pool"
    ((sum <= POOL[$n])) || pn_fail "$n overcommitted: $sum bytes of volumes in a ${POOL[$n]}-byte pool"
  done
}

# all_bound SET N SECONDS: until N claims of SET are Bound.
all_bound() {
  local b=0
  for _ in $(seq $((2 * $3))); do
    b=$(k get pvc -l "set=$1" -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -c '^Bound$' || true)
    ((b >= $2)) && return 0
    sleep 0.5
  done
  pn_fail "$b of $2 claims of $1 Bound after $3 s: $(k get pvc -l "set=$1" --no-headers | grep -v Bound | head -5)"
}

# clean SET: pods and claims of SET deleted, their volumes gone.
clean() {
  k delete pods -l "set=$1" --grace-period=0 --force >/dev/null 2>&1 || true
  k delete pvc -l "set=$1" --wait=false >/dev/null
  local left n
  for _ in $(seq 240); do
    left=0
    for n in "${PN_NAMES[@]}"; do left=$((left + $(pn_volumes "$n" | grep -c . || true))); done
    ((left == 0)) && [[ -z $(k get pv -o name) ]] && break
    sleep 0.5
  done
  ((left == 0)) || pn_fail "$left volumes of $1 left on the nodes"
  # One DELETE of the collection: kubectl delete --all sends one per event,
  # and a 400-pod blind burst leaves thousands (13 min in scheduling-bench).
  k delete --raw "/api/v1/namespaces/default/events" >/dev/null 2>&1 || true
}

bound_count() {
  k get pvc -l "set=$1" -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' | grep -c '^Bound$' || true
}

# burst MODE: 40 pods at once; every claim Bound, no node overcommitted.
burst() {
  local t0 secs r
  t0=$(date +%s.%N)
  pods_yaml "$1" 40 8 12 16 24 | k apply -f - >/dev/null || fail "creating the $1 pods"
  all_bound "$1" 40 400
  secs=$(elapsed "$t0")
  r=$(reschedules)
  check_no_overcommit
  step "$1: 40 claims Bound in $secs s with $r reschedules"
}
