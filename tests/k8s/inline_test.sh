#!/usr/bin/env bash
# Under the real kubelet (run by cluster-up): an inline ephemeral flexVolume
# (options pool, size) is created when the pod starts (nodevol volume
# ephemeral-<pod UID>-<volume name>, writable in the container) and deleted
# when the pod is deleted.
K8S_TEST=inline
# Pools refuse inline volumes unless the operator says inline=on.
K8S_POOL_EXTRA=,inline=on,inline-max-size=64Mi
source "$(dirname "$0")/lib.sh"
nodevold_start
step "pod with an inline volume"
k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: inl}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: $BUSYBOX_IMAGE
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "echo x > /scratch/f && echo write-ok; sleep 3600"]
    volumeMounts: [{name: scratch, mountPath: /scratch}]
  volumes:
  - name: scratch
    flexVolume:
      driver: nodevol.io/volume
      options: {pool: default, size: 10Mi}
YAML
k wait --for=condition=Ready pod/inl --timeout=120s >/dev/null || fail "pod inl not Ready"
wait_log inl write-ok
uid=$(k get pod inl -o jsonpath='{.metadata.uid}')
name=ephemeral-$uid-scratch
ctl volume get "$name" >/dev/null || fail "no nodevol volume $name while the pod runs ($(ctl volume list))"
step "pod deleted: volume gone"
k delete pod inl --wait=true --timeout=60s >/dev/null || fail "delete inl"
for _ in $(seq 60); do ctl volume list | grep -q "$name" || break; sleep 0.5; done
! ctl volume list | grep -q "$name" || fail "volume $name still there after the pod was deleted"
[[ ! -e $K8S_PODS_ROOT/$uid/volumes/nodevol.io~volume/scratch ]] || fail "kubelet's target still there"
step "PASS"
