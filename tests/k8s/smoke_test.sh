#!/usr/bin/env bash
# End-to-end smoke test under the real kubelet, run by cluster-up:
#   tests/k8s/cluster-up -- tests/k8s/smoke_test.sh
# A sandboxed nodevold with a dir pool (at NODEVOL_K8S_FLEX_SOCKET, where
# kubelet's nodevol-flex looks), a nodevol volume, a static PV with a
# flexVolume source (driver nodevol.io/volume) bound to a PVC, a pod that
# writes a file; the pod deleted and recreated sees the file; after the last
# pod the target is unmounted and kubelet's volume directory is gone.
# Needs NODEVOLD and NODEVOLCTL (paths) in the environment.
set -euo pipefail
: "${KUBECTL:?run under tests/k8s/cluster-up}" "${NODEVOLD:?}" "${NODEVOLCTL:?}"
source "$(dirname "$0")/versions.env"
k() { "$KUBECTL" "$@"; }
step() { printf '[smoke %(%T)T] %s\n' -1 "$*" >&2; }
fail() {
  echo "FAIL: $*" >&2
  k get pods,pv,pvc -o wide >&2 || true
  k get events --sort-by=.lastTimestamp >&2 || true
  echo "---- nodevold log (tail)" >&2; tail -20 "$K8S_WORK/logs/nodevold.log" >&2 || true
  echo "---- kubelet log (flex lines)" >&2; grep -i flex "$K8S_WORK/logs/kubelet.log" | tail -20 >&2 || true
  exit 1
}

nv=$K8S_WORK/nodevold
mkdir -p "$nv/state" "$nv/pool"
: >"$nv/nodevold.conf"
step "nodevold with a dir pool"
"$NODEVOLD" --config="$nv/nodevold.conf" --socket="$NODEVOL_K8S_FLEX_SOCKET" --state-dir="$nv/state" \
  --pods-root="$K8S_PODS_ROOT" --node-name="$K8S_NODE" --pool="name=default,backend=dir,path=$nv/pool" \
  --metrics-address=off --log-target=stderr --log-level=debug >"$K8S_WORK/logs/nodevold.log" 2>&1 &
nvpid=$!
# Pods go before nodevold does, so that kubelet's unmount calls reach it.
trap 'k delete pods --all --grace-period=1 --timeout=60s >/dev/null 2>&1 || true; kill $nvpid 2>/dev/null || true; wait $nvpid 2>/dev/null || true' EXIT
ctl() { "$NODEVOLCTL" --socket "$NODEVOL_K8S_FLEX_SOCKET" "$@"; }
for _ in $(seq 100); do ctl volume list >/dev/null 2>&1 && break; sleep 0.1; done
ctl volume create v1 --pool default --size 10Mi --param nodevol.io/pvc-namespace=default >/dev/null ||
  fail "volume create"

step "PV, PVC, pod writer-1"
pod() { # NAME COMMAND
  cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: $BUSYBOX_IMAGE
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "$2"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: c1}
YAML
}
k apply -f - >/dev/null <<YAML || fail "apply PV/PVC"
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-v1}
spec:
  capacity: {storage: 10Mi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  flexVolume:
    driver: nodevol.io/volume
    options: {volume: v1}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: c1}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  volumeName: pv-v1
  resources: {requests: {storage: 10Mi}}
YAML
# Bound before the pod: a pod scheduled against an unbound claim waits out
# the scheduler's backoff (about 30 s).
k wait --for=jsonpath='{.status.phase}'=Bound pvc/c1 --timeout=60s >/dev/null || fail "PVC not Bound"
pod writer-1 'echo hello-from-pod > /data/f && sleep 3600' | k apply -f - >/dev/null
k wait --for=condition=Ready pod/writer-1 --timeout=120s >/dev/null || fail "writer-1 not Ready"
uid=$(k get pod writer-1 -o jsonpath='{.metadata.uid}')
target=$K8S_PODS_ROOT/$uid/volumes/nodevol.io~volume/pv-v1
findmnt "$target" >/dev/null || fail "no mount at kubelet's target $target"
got=$(k exec writer-1 -- cat /data/f) || fail "kubectl exec"
[[ $got == hello-from-pod ]] || fail "pod reads '$got'"
[[ $(find "$nv/pool" -name f -type f -exec cat {} +) == hello-from-pod ]] || fail "file not in the pool"

step "pod deleted, target unmounted and removed"
k delete pod writer-1 --wait=true --timeout=60s >/dev/null || fail "delete writer-1"
for _ in $(seq 60); do [[ -e $target ]] || break; sleep 0.5; done
[[ ! -e $target ]] || fail "kubelet's target $target still there"
! grep -q " $target " /proc/self/mountinfo || fail "$target still mounted"

step "reader pod sees the file"
pod reader-1 'cat /data/f; sleep 3600' | k apply -f - >/dev/null
k wait --for=condition=Ready pod/reader-1 --timeout=120s >/dev/null || fail "reader-1 not Ready"
for _ in $(seq 20); do got=$(k logs reader-1) && [[ -n $got ]] && break; sleep 0.5; done
[[ $got == hello-from-pod ]] || fail "reader-1 logs '$got'"
uid=$(k get pod reader-1 -o jsonpath='{.metadata.uid}')
target=$K8S_PODS_ROOT/$uid/volumes/nodevol.io~volume/pv-v1
k delete pod reader-1 --wait=true --timeout=60s >/dev/null || fail "delete reader-1"
for _ in $(seq 60); do [[ -e $target ]] || break; sleep 0.5; done
[[ ! -e $target ]] || fail "kubelet's target $target still there after the last pod"
step "PASS"
