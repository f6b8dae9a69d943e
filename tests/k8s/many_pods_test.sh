#!/usr/bin/env bash
# Under the real kubelet (run by cluster-up): 30 pods started at once on one
# node, each with its own volume (a static PV bound to its own claim). All
# run, every one sees its own volume and only its own (each pod writes its
# name; the file turns up in that volume's directory and nowhere else), and
# after they are deleted nothing stays mounted or published.
K8S_TEST=many-pods
source "$(dirname "$0")/lib.sh"
n=${K8S_MANY_PODS:-30}
nodevold_start

step "$n volumes, PVs and claims"
yaml=$K8S_WORK/many.yaml
for i in $(seq "$n"); do
  ctl volume create "m$i" --pool default --size 10Mi --param nodevol.io/pvc-namespace=default >/dev/null ||
    fail "volume create m$i"
  cat >>"$yaml" <<YAML
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-m$i}
spec:
  capacity: {storage: 10Mi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  flexVolume: {driver: nodevol.io/volume, options: {volume: m$i}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: c-m$i}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  volumeName: pv-m$i
  resources: {requests: {storage: 10Mi}}
---
YAML
done
k apply -f "$yaml" >/dev/null || fail "apply PVs and claims"
for i in $(seq "$n"); do
  k wait --for=jsonpath='{.status.phase}'=Bound "pvc/c-m$i" --timeout=120s >/dev/null || fail "c-m$i not Bound"
done

step "$n pods at once"
: >"$yaml"
for i in $(seq "$n"); do claim_pod "p$i" "c-m$i" "echo p$i > /data/who && sleep 3600" >>"$yaml"; echo --- >>"$yaml"; done
t0=$SECONDS
k apply -f "$yaml" >/dev/null || fail "apply pods"
k wait --for=condition=Ready pod --all --timeout=480s >/dev/null || fail "not all $n pods Ready"
step "all $n Ready in $((SECONDS - t0)) s"

step "each pod sees its own volume"
for i in $(seq "$n"); do
  target=$(pod_target "p$i" "pv-m$i")
  [[ -n $(mount_id "$target") ]] || fail "p$i: $target not mounted"
  path=$(ctl -o json volume get "m$i" | sed -n 's/.*"path": *"\([^"]*\)".*/\1/p' | head -1)
  [[ -n $path ]] || fail "no data path for m$i"
  for _ in $(seq 20); do [[ -s $path/who ]] && break; sleep 0.5; done
  [[ $(cat "$path/who") == "p$i" ]] || fail "volume m$i holds '$(cat "$path/who" 2>&1)', not p$i"
  [[ $(stat -c %d:%i "$target") == $(stat -c %d:%i "$path") ]] || fail "p$i's target is not m$i's directory"
done
[[ $(grep -c " $K8S_PODS_ROOT/.*nodevol.io~volume" /proc/self/mountinfo) -eq $n ]] \
  || fail "expected $n nodevol mounts under the pods root, found $(grep -c " $K8S_PODS_ROOT/.*nodevol.io~volume" /proc/self/mountinfo)"

step "all pods deleted: nothing mounted, nothing published"
k delete pods --all --wait=true --timeout=300s >/dev/null || fail "delete pods"
for _ in $(seq 120); do
  grep -q " $K8S_PODS_ROOT/.*nodevol.io~volume" /proc/self/mountinfo || break
  sleep 0.5
done
# Negative checks on what the tools said, never on a tool that failed.
mi=$(cat /proc/self/mountinfo) || fail "cannot read the mount table"
! grep -q " $K8S_PODS_ROOT/.*nodevol.io~volume" <<<"$mi" || fail "mounts left: $(grep -c " $K8S_PODS_ROOT/.*nodevol.io~volume" <<<"$mi")"
pubs=-1
for _ in $(seq 60); do
  l=$(ctl -o json volume list) || fail "nodevolctl volume list failed: $l"
  pubs=$(grep -c '"published_at": \[$' <<<"$l" || true)
  ((pubs == 0)) && break
  sleep 0.5
done
((pubs == 0)) || fail "nodevold still lists $pubs publications"
step "PASS"
