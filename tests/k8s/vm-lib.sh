# Helpers for tests run under `tests/k8s/cluster-up --node-in-vm` (sourced):
# kubectl runs here on the host, the node (kubelet, containerd, nodevold)
# in the guest, and node_sh runs a check there (findmnt, lvm, nodevolctl)
# through tests/k8s/vm-node's request files on the guest's share.
# Needs KUBECTL, K8S_VM_SHARE, K8S_PODS_ROOT (the guest's) from cluster-up.
set -euo pipefail
: "${KUBECTL:?run under tests/k8s/cluster-up --node-in-vm}"
[[ ${K8S_IN_VM:-} == 1 && -d ${K8S_VM_SHARE:-} ]] || { echo "needs cluster-up --node-in-vm" >&2; exit 2; }
source "$(dirname "${BASH_SOURCE[0]}")/versions.env"
k() { "$KUBECTL" "$@"; }
step() { printf '[%s %(%T)T] %s\n' "${K8S_TEST:-test}" -1 "$*" >&2; }
fail() {
  echo "FAIL: $*" >&2
  k get pods,pv,pvc -o wide >&2 || true
  k get events --sort-by=.lastTimestamp >&2 || true
  echo "---- guest nodevold log (tail)" >&2; tail -20 "$K8S_VM_SHARE/out/nodevold.log" >&2 || true
  echo "---- guest kubelet log (flex lines)" >&2
  grep -i flex "$K8S_VM_SHARE/out/kubelet.log" | tail -20 >&2 || true
  exit 1
}

source "$(dirname "${BASH_SOURCE[0]}")/k8s-common.sh"
# Guest-side helpers every node_sh script gets (the guest exports
# NV_SOCKET, NV_STATE, K8S_PODS_ROOT, NFS_EXPORT, NODEVOLCTL).
node_prelude='set -euo pipefail
export DM_DISABLE_UDEV=1
ctl() { "$NODEVOLCTL" --socket "$NV_SOCKET" "$@"; }
lvs_nv() { lvm lvs --noheadings -o lv_name nv 2>/dev/null | tr -d " "; }
mnt() { findmnt -n -o SOURCE,FSTYPE,OPTIONS --mountpoint "$1"; }
# is_lv_mount DIR LV: DIR is a read-write ext4 mount of /dev/nv/LV.
is_lv_mount() {
  local m
  m=$(mnt "$1") || { echo "$1: not a mount"; return 1; }
  echo "$1: $m"
  set -- $m "$2"
  [[ $(realpath "$1") == $(realpath "/dev/nv/$4") && $2 == ext4 && ,$3, == *,rw,* ]]
}
'
# node_sh SCRIPT: runs SCRIPT (bash) in the guest, prints its output, returns
# its status. Fails the test when the guest does not answer in 120 s.
# Request names are unique (time and pid: node_sh often runs in a subshell,
# where a counter would not advance) and sort in the order made.
node_sh() {
  local ex=$K8S_VM_SHARE/exec id
  id=$ex/$(date +%s%N)-$BASHPID
  [[ -e $ex/ready ]] || fail "the guest's node is not serving requests"
  printf '%s\n%s\n' "$node_prelude" "$1" >"$id.tmp"
  mv "$id.tmp" "$id.req"
  local tenths
  tenths=$(scaled 1200)
  for _ in $(seq "$tenths"); do
    if [[ -e $id.rc ]]; then
      cat "$id.out"
      local rc
      rc=$(<"$id.rc")
      rm -f "$id.out" "$id.rc"
      return "$rc"
    fi
    sleep 0.1
  done
  fail "the guest did not answer a request within $((tenths / 10)) s: $1"
}
# node_ctl ARGS...: nodevolctl in the guest, on the node's nodevold.
node_ctl() { node_sh "ctl $(printf '%q ' "$@")"; }
# node_wait SECONDS WHAT SCRIPT: until SCRIPT succeeds in the guest.
node_wait() {
  local limit what=$2 t0=$SECONDS
  limit=$(scaled "$1")
  until node_sh "$3" >/dev/null 2>&1; do
    ((SECONDS - t0 < limit)) || fail "$what: not so after ${limit}s ($(node_sh "$3" 2>&1 | tail -3))"
    sleep 0.5
  done
}

# static_pv_pvc NAME POOL SIZE [nodevolctl create flags...]: nodevol volume
# NAME in POOL (in the guest), PV pv-NAME (flexVolume, volume: NAME), PVC
# c-NAME bound to it.
static_pv_pvc() {
  local name=$1 pool=$2 size=$3
  shift 3
  node_ctl volume create "$name" --pool "$pool" --size "$size" "$@" >/dev/null || fail "volume create $name"
  k apply -f - >/dev/null <<YAML || fail "apply PV/PVC $name"
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-$name}
spec:
  capacity: {storage: $size}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  flexVolume: {driver: nodevol.io/volume, options: {volume: $name}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: c-$name}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  volumeName: pv-$name
  resources: {requests: {storage: $size}}
YAML
  k wait --for=jsonpath='{.status.phase}'=Bound "pvc/c-$name" --timeout="$(scaled 60)s" >/dev/null || fail "PVC c-$name not Bound"
}

# pod_apply NAME COMMAND VOLUME-YAML: a busybox pod running COMMAND with
# volume "data" at /data, VOLUME-YAML being that volume's source, e.g.
# "persistentVolumeClaim: {claimName: c-x}".
pod_apply() {
  k apply -f - >/dev/null <<YAML || fail "apply pod $1"
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
    $3
YAML
}
# pod_running NAME: Ready within 300 s (an emulated node is slow; scaled); prints its UID.
pod_running() {
  k wait --for=condition=Ready "pod/$1" --timeout="$(scaled 300)s" >/dev/null || fail "pod $1 not Ready"
  k get pod "$1" -o jsonpath='{.metadata.uid}'
}
# wait_log POD TEXT: until the pod's log has a line TEXT (120 s, scaled).
wait_log() {
  for _ in $(seq "$(scaled 240)"); do
    k logs "$1" 2>/dev/null | grep -qx -- "$2" && return 0
    sleep 0.5
  done
  fail "pod $1 never logged '$2' (log: $(k logs "$1" 2>&1 | tail -3))"
}
# pod_delete NAME: deleted and gone from the API within 300 s (scaled): kubelet
# on an emulated node beside another VM test took over 120 s in CI.
pod_delete() { k delete pod "$1" --wait=true --timeout="$(scaled 300)s" >/dev/null || fail "delete pod $1"; }
# target UID VOLUME: kubelet's directory for a flex volume of a pod (guest path).
target() { echo "$K8S_PODS_ROOT/$1/volumes/nodevol.io~volume/$2"; }
# gone_after_pod UID VOLUME: kubelet's target is unmounted and the pod's
# directory is removed (kubelet's housekeeping, within 120 s).
gone_after_pod() {
  local t
  t=$(target "$1" "$2")
  node_wait 60 "$t unmounted" "! findmnt --mountpoint '$t' >/dev/null"
  node_wait 120 "pod directory $K8S_PODS_ROOT/$1 removed" "[[ ! -e '$K8S_PODS_ROOT/$1' ]]"
}
