#!/usr/bin/env bash
# Under the real kubelet (run by cluster-up): a claim mounted readOnly is
# read-only inside the container (writes fail, the mount is ro), and a pod
# with securityContext.fsGroup and a non-root user can write to its volume
# (nodevold applies the fsGroup at publish; the driver says fsGroup:false).
K8S_TEST=ro-fsgroup
source "$(dirname "$0")/lib.sh"
nodevold_start
static_pv_pvc ro
static_pv_pvc fsg

step "readOnly claim: writes fail"
k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: ro}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: $BUSYBOX_IMAGE
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "if touch /data/x 2>/dev/null; then echo WRITABLE; else echo ro-ok; fi; grep ' /data ' /proc/mounts | cut -d' ' -f4 | cut -d, -f1; sleep 3600"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: c-ro, readOnly: true}
YAML
k wait --for=condition=Ready pod/ro --timeout=120s >/dev/null || fail "pod ro not Ready"
wait_log ro ro-ok
k logs ro | grep -qx ro || fail "/data not mounted ro in the container: $(k logs ro)"
uid=$(k get pod ro -o jsonpath='{.metadata.uid}')
findmnt -n -o OPTIONS "$K8S_PODS_ROOT/$uid/volumes/nodevol.io~volume/pv-ro" | grep -qE '(^|,)ro(,|$)' \
  || fail "kubelet's target for pod ro is not a read-only mount"

step "fsGroup 2000, user 1000: writes succeed"
k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: fsg}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  securityContext: {runAsUser: 1000, runAsGroup: 1000, fsGroup: 2000}
  containers:
  - name: c
    image: $BUSYBOX_IMAGE
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "id -u; if echo x > /data/f; then echo write-ok; else echo write-failed; fi; stat -c %g /data/f; sleep 3600"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: c-fsg}
YAML
k wait --for=condition=Ready pod/fsg --timeout=120s >/dev/null || fail "pod fsg not Ready"
wait_log fsg write-ok
k logs fsg | grep -qx 2000 || fail "new file's group is not the fsGroup: $(k logs fsg)"
step "PASS"
