# Helpers shared by lib.sh (node on the host) and vm-lib.sh (node in a VM),
# sourced by both after they define k and fail.

# scaled SECONDS: SECONDS times NODEVOL_TIMEOUT_PERCENT / 100 (tests/speed,
# set by scripts/test). A test's waits go through it: on a busier or slower
# machine a node is slower still (issue 61: no wait that trips where
# ctest's own timeout, scaled alike, would not).
scaled() { echo $(($1 * ${NODEVOL_TIMEOUT_PERCENT:-100} / 100)); }

# wait_event OBJECT_NAME REASON [TEXT]: until an event REASON about the
# object (with TEXT in its message) exists; prints the messages (90 s, scaled).
wait_event() {
  local m
  for _ in $(seq "$(scaled 180)"); do
    m=$(k get events --all-namespaces --field-selector "involvedObject.name=$1,reason=$2" \
      -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' 2>/dev/null)
    if [[ -n $m ]] && [[ -z ${3:-} || $m == *"$3"* ]]; then
      echo "$m"
      return 0
    fi
    sleep 0.5
  done
  fail "no $2 event for $1${3:+ saying '$3'} (got: $m)"
}


# snapshot_api_up: the VolumeSnapshot CRDs applied and the snapshot-controller
# running (out of cluster, admin kubeconfig, in the cluster's namespace), both
# from tests/k8s/build-snapshotter; exit 77 when they are not built. The pid
# goes to SNAPSHOT_CONTROLLER_PID; the log to <work>/logs/snapshot-controller.log.
snapshot_api_up() {
  local dir
  dir=$("$(dirname "${BASH_SOURCE[0]}")/build-snapshotter" --check) || {
    echo "snapshot-controller not built: run tests/k8s/build-snapshotter"; exit 77; }
  k apply -f "$dir/crd" >/dev/null || fail "apply the snapshot CRDs"
  k wait --for=condition=Established --timeout=60s \
    crd/volumesnapshots.snapshot.storage.k8s.io crd/volumesnapshotcontents.snapshot.storage.k8s.io \
    crd/volumesnapshotclasses.snapshot.storage.k8s.io crd/volumegroupsnapshots.groupsnapshot.storage.k8s.io \
    >/dev/null || fail "snapshot CRDs not established"
  nsenter --net="/run/netns/$K8S_NETNS" "$dir/snapshot-controller" --kubeconfig="$K8S_WORK/admin.kubeconfig" \
    --leader-election=false --retry-interval-max=10s --v=3 >"$K8S_WORK/logs/snapshot-controller.log" 2>&1 &
  SNAPSHOT_CONTROLLER_PID=$!
}

# deploy/base's namespace and ServiceAccount.
NS=nodevol-system SA=nodevol-provisioner
# deploy_base_apply DEPLOY_DIR: DEPLOY_DIR/base applied with the Deployment
# at 0 replicas: its namespace, ServiceAccount and RBAC, nothing running.
deploy_base_apply() {
  local overlay=$K8S_WORK/deploy-overlay
  mkdir -p "$overlay"
  # kustomize takes a base by relative path only.
  cat >"$overlay/kustomization.yaml" <<YAML
resources: [$(realpath --relative-to="$overlay" "$1/base")]
replicas: [{name: nodevol-provisioner, count: 0}]
YAML
  k apply -k "$overlay" >/dev/null || fail "apply deploy/base"
}
# sa_kubeconfig OUT: a kubeconfig carrying only the ServiceAccount's token
# (one hour), to run nodevol-provisioner out of cluster with exactly
# deploy/base's permissions (after deploy_base_apply).
sa_kubeconfig() {
  local token ca
  token=$(k -n $NS create token $SA --duration=1h) || fail "kubectl create token"
  ca=$(sed -n 's/.*certificate-authority: *"\([^"]*\)".*/\1/p' "$K8S_WORK/admin.kubeconfig" | head -1)
  [[ -r $ca ]] || fail "no cluster CA in admin.kubeconfig"
  (
    umask 077
    cat >"$1" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "https://127.0.0.1:6443", certificate-authority: "$ca"}
users:
- name: $SA
  user: {token: "$token"}
contexts:
- name: local
  context: {cluster: local, user: $SA, namespace: $NS}
current-context: local
YAML
  )
}
