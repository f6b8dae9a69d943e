# Helpers for tests run under tests/k8s/cluster-up (sourced).
# Needs KUBECTL, K8S_WORK, K8S_NODE, K8S_PODS_ROOT, NODEVOL_K8S_FLEX_SOCKET
# (from cluster-up) and NODEVOLD, NODEVOLCTL (from ctest).
# K8S_NODEVOLD_LOG_LEVEL: nodevold_start's --log-level (default debug).
# K8S_NODEVOLD_METRICS: nodevold_start's --metrics-address (default off).
set -euo pipefail
: "${KUBECTL:?run under tests/k8s/cluster-up}" "${NODEVOLD:?}" "${NODEVOLCTL:?}"
source "$(dirname "${BASH_SOURCE[0]}")/versions.env"
k() { "$KUBECTL" "$@"; }
step() { printf '[%s %(%T)T] %s\n' "${K8S_TEST:-test}" -1 "$*" >&2; }
fail() {
  echo "FAIL: $*" >&2
  k get pods,pv,pvc -o wide >&2 || true
  k get events --sort-by=.lastTimestamp >&2 || true
  echo "---- nodevold log (tail)" >&2; tail -20 "$K8S_WORK/logs/nodevold.log" >&2 || true
  exit 1
}
ctl() { "$NODEVOLCTL" --socket "$NODEVOL_K8S_FLEX_SOCKET" "$@"; }
source "$(dirname "${BASH_SOURCE[0]}")/k8s-common.sh"

# On exit: pods are deleted first (kubelet's unmounts still reach
# nodevold), then every process in CLEANUP_PIDS, last started first. Tests
# append the pids of what they start. No command here may fail the exit
# status (set -e applies inside traps too).
CLEANUP_PIDS=()
cleanup() {
  k delete pods --all --grace-period=1 --timeout=60s >/dev/null 2>&1 || true
  local i
  for ((i = ${#CLEANUP_PIDS[@]} - 1; i >= 0; i--)); do
    kill "${CLEANUP_PIDS[i]}" 2>/dev/null || true
    wait "${CLEANUP_PIDS[i]}" 2>/dev/null || true
  done
}
trap cleanup EXIT

# nodevold_start: a sandboxed nodevold with dir pool "default" where
# kubelet's nodevol-flex looks; stopped (after all pods are deleted) on exit
# (cleanup).
# Extra arguments go to nodevold (e.g. --tls-listen=...). It runs in the
# cluster's network namespace (nsenter --net only: its mounts stay in the
# host's mount namespace), so a TCP listener is on the node's address.
nodevold_start() {
  local nv=$K8S_WORK/nodevold
  mkdir -p "$nv/state" "$nv/pool"
  : >"$nv/nodevold.conf"
  nsenter --net="/run/netns/$K8S_NETNS" "$NODEVOLD" --config="$nv/nodevold.conf" \
    --socket="$NODEVOL_K8S_FLEX_SOCKET" --state-dir="$nv/state" --pods-root="$K8S_PODS_ROOT" \
    --node-name="$K8S_NODE" --pool="name=default,backend=dir,path=$nv/pool${K8S_POOL_EXTRA:-}" \
    --metrics-address="${K8S_NODEVOLD_METRICS:-off}" --log-target=stderr --log-level="${K8S_NODEVOLD_LOG_LEVEL:-debug}" "$@" >"$K8S_WORK/logs/nodevold.log" 2>&1 &
  NODEVOLD_PID=$!
  CLEANUP_PIDS+=("$NODEVOLD_PID")
  for _ in $(seq 100); do ctl volume list >/dev/null 2>&1 && return 0; sleep 0.1; done
  fail "nodevold did not start"
}

# static_pv_pvc VOLUME: nodevol volume VOLUME (10Mi), PV pv-VOLUME, PVC c-VOLUME, Bound.
static_pv_pvc() {
  # The claim's namespace: nodevold publishes the volume only into its pods.
  ctl volume create "$1" --pool default --size 10Mi --param nodevol.io/pvc-namespace=default >/dev/null ||
    fail "volume create $1"
  k apply -f - >/dev/null <<YAML || fail "apply PV/PVC $1"
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-$1}
spec:
  capacity: {storage: 10Mi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  flexVolume: {driver: nodevol.io/volume, options: {volume: $1}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: c-$1}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  volumeName: pv-$1
  resources: {requests: {storage: 10Mi}}
YAML
  k wait --for=jsonpath='{.status.phase}'=Bound "pvc/c-$1" --timeout="$(scaled 60)s" >/dev/null || fail "PVC c-$1 not Bound"
}

# wait_log POD TEXT: until the pod's log has a line TEXT (60 s, scaled)
wait_log() {
  for _ in $(seq "$(scaled 120)"); do
    k logs "$1" 2>/dev/null | grep -qx -- "$2" && return 0
    sleep 0.5
  done
  fail "pod $1 never logged '$2' (log: $(k logs "$1" 2>&1 | tail -3))"
}

# pod_with NAME COMMAND SOURCE [SPEC]: YAML of a busybox pod running
# COMMAND with volume "data" at /data, whose source is SOURCE (flow YAML,
# e.g. "persistentVolumeClaim: {claimName: c}"); SPEC adds pod spec fields
# (flow YAML, e.g. "securityContext: {fsGroup: 1}"). Pipe it to `k apply -f -`.
pod_with() {
  cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  ${4:-}
  containers:
  - name: c
    image: $BUSYBOX_IMAGE
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "$2"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    $3
YAML
}

# claim_pod NAME CLAIM COMMAND: YAML of a busybox pod running COMMAND with
# claim CLAIM at /data (pipe it to `k apply -f -`).
claim_pod() { pod_with "$1" "$3" "persistentVolumeClaim: {claimName: $2}"; }

# pod_target POD VOLUME_PV: kubelet's mount point of the pod's flexVolume PV.
pod_target() {
  echo "$K8S_PODS_ROOT/$(k get pod "$1" -o jsonpath='{.metadata.uid}')/volumes/nodevol.io~volume/$2"
}

# mount_id PATH: the mount ID (mountinfo field 1) of the mount at PATH, or "".
mount_id() { awk -v t="$1" '$5 == t { print $1 }' /proc/self/mountinfo | tail -1; }

# make_tls DIR NODE: a CA and certificates for nodevold on NODE and for the
# provisioner (tests/k8s/make-tls).
make_tls() { "$(dirname "${BASH_SOURCE[0]}")/make-tls" "$1" "$2" || fail "making certificates"; }

# sign_cert DIR NAME SAN USAGE: DIR/NAME.{crt,key}, signed by the CA
# make_tls made in DIR: subjectAltName SAN ("DNS:x", "IP:1.2.3.4"),
# extendedKeyUsage USAGE (serverAuth or clientAuth).
sign_cert() {
  local d=$1 n=$2 san=$3 usage=$4
  (
    cd "$d"
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$n" \
      -keyout "$n.key" -out "$n.csr" 2>/dev/null
    printf '%s\n' 'basicConstraints = CA:FALSE' 'keyUsage = critical,digitalSignature' \
      "extendedKeyUsage = $usage" "subjectAltName = $san" >"$n.ext"
    openssl x509 -req -in "$n.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
      -extfile "$n.ext" -out "$n.crt" 2>/dev/null
    chmod 600 "$n.key"
  ) || fail "certificate $n"
}

# storage_class NAME [binding=Immediate|WaitForFirstConsumer] [reclaim=Delete|Retain]
#   [expand=true] [provisioner=P] [KEY=VALUE...]: applies a StorageClass of P
# (default nodevol.io); other KEY=VALUE pairs are its parameters.
# volumeSource is flexVolume unless given: these tests are the FlexVolume
# front door's (the provisioner's default, csi, is csi_test.sh's).
storage_class() {
  local name=$1 binding=Immediate reclaim=Delete expand=false prov=nodevol.io params="" a
  shift
  [[ " $* " == *" volumeSource="* ]] || set -- "$@" volumeSource=flexVolume
  for a in "$@"; do
    case $a in
      binding=*) binding=${a#*=} ;;
      reclaim=*) reclaim=${a#*=} ;;
      expand=*) expand=${a#*=} ;;
      provisioner=*) prov=${a#*=} ;;
      *=*) params+="${params:+, }${a%%=*}: \"${a#*=}\"" ;;
      *) fail "storage_class $name: '$a' is not KEY=VALUE" ;;
    esac
  done
  k apply -f - >/dev/null <<YAML || fail "apply StorageClass $name"
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: $name}
provisioner: $prov
parameters: {$params}
reclaimPolicy: $reclaim
allowVolumeExpansion: $expand
volumeBindingMode: $binding
YAML
}

# claim NAME CLASS SIZE: a ReadWriteOnce claim of CLASS (label app=e2e).
claim() {
  k apply -f - >/dev/null <<YAML || fail "apply claim $1"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $1, labels: {app: e2e}}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: $2
  resources: {requests: {storage: $3}}
YAML
}

# bound NAME [SECONDS]: waits until claim NAME is Bound (default 60 s).
bound() { k wait --for=jsonpath='{.status.phase}'=Bound "pvc/$1" --timeout="$(scaled "${2:-60}")s" >/dev/null; }

# ctr_ ARGS: ctr on the node's containerd, in kubelet's namespace.
ctr_() { ctr --address "$K8S_WORK/containerd/containerd.sock" --namespace k8s.io "$@"; }

# provisioner_image TAG: packaging/image/build-oci of NODEVOL_PROVISIONER as
# registry.local/nodevol/provisioner:TAG, imported into the node's
# containerd (pods use it with imagePullPolicy Never).
provisioner_image() {
  local ref=registry.local/nodevol/provisioner:$1
  "$(dirname "${BASH_SOURCE[0]}")/../../packaging/image/build-oci" --binary "$NODEVOL_PROVISIONER" --version "$1" \
    --out "$K8S_WORK/provisioner.oci.tar" >"$K8S_WORK/logs/build-oci.log" 2>&1 \
    || { cat "$K8S_WORK/logs/build-oci.log" >&2; fail "build-oci"; }
  ctr_ images import "$K8S_WORK/provisioner.oci.tar" >>"$K8S_WORK/logs/ctr.log" 2>&1 || fail "ctr images import"
  ctr_ images ls -q | grep -x "$ref" >/dev/null || fail "$ref not in containerd after the import"
}
