#!/usr/bin/env bash
# Under the real kubelet in a VM (cluster-up --node-in-vm --vm-pools lvm):
# nodevol LVM volumes (thick VG "nv" on the guest's disk, ext4) in real pods.
# A static PV (flexVolume, volume: lv1) bound to a PVC: a pod writes a file;
# deleted and recreated, the new pod reads it. Checked in the guest each
# time: kubelet's target is a bind of the LV, the staging mount is there
# while published and gone after the last pod, kubelet's target and pod
# directory are gone. Then an inline ephemeral volume on the LVM pool: its
# LV exists while the pod runs and is gone after it is deleted.
# Then the CSI front door on the same node (flexVolume and CSI side by
# side): CSINode lists nodevol.io; a raw block LV (nodevolctl --block) as
# a static spec.csi PV with volumeMode Block; a pod with that device and
# the flexVolume claim writes to the device, the guest reads it off the
# LV; kubelet's publish file is the LV's device node and no VolumeAttachment
# is made; after the pod, the file and every block bind are gone, the LV
# stays, and a new pod reads the data back.
K8S_TEST=lvm
source "$(dirname "$0")/vm-lib.sh"
staging=/var/lib/nvk8s/nodevol/staging/lvm/lv1  # <state dir>/staging/<pool>/<volume>

# lv_mounted DIR LV: in the guest, DIR is a read-write ext4 mount of /dev/nv/LV.
lv_mounted() { node_sh "is_lv_mount '$1' '$2'"; }

step "volume lv1 (64Mi) in pool lvm, PV pv-lv1, PVC c-lv1"
static_pv_pvc lv1 lvm 64Mi --param nodevol.io/pvc-namespace=default
node_sh 'lvs_nv | grep -qx nv-lv1' || fail "no LV nv-lv1: $(node_sh lvs_nv)"

step "pod app writes /data/f"
pod_apply app 'echo hello-lvm > /data/f && sync && echo write-ok; sleep 3600' \
  "persistentVolumeClaim: {claimName: c-lv1}"
uid1=$(pod_running app)
wait_log app write-ok
t1=$(target "$uid1" pv-lv1)
lv_mounted "$t1" nv-lv1 >&2 || fail "kubelet's target is not the LV"
lv_mounted "$staging" nv-lv1 >&2 || fail "no staging mount while published"
[[ $(node_sh "cat '$staging/f'") == hello-lvm ]] || fail "the file is not on the LV"
node_ctl volume list | grep -q lv1 || fail "nodevolctl volume list lacks lv1"

step "app deleted: target unmounted, pod directory removed, staging unmounted"
pod_delete app
gone_after_pod "$uid1" pv-lv1
node_wait 30 "staging mount gone after the last publication" "m=\$(cat /proc/self/mountinfo) && ! grep -qF ' $staging ' <<<\"\$m\""
node_sh 'lvs_nv | grep -qx nv-lv1' || fail "the LV went with the pod"

step "app recreated: the file is still there"
pod_apply app 'cat /data/f; sleep 3600' "persistentVolumeClaim: {claimName: c-lv1}"
uid2=$(pod_running app)
[[ $uid2 != "$uid1" ]] || fail "the recreated pod has the old UID"
wait_log app hello-lvm
lv_mounted "$(target "$uid2" pv-lv1)" nv-lv1 >&2 || fail "the new pod's target is not the LV"
lv_mounted "$staging" nv-lv1 >&2 || fail "no staging mount with the second publication"
pod_delete app
gone_after_pod "$uid2" pv-lv1
node_wait 30 "staging mount gone after the last publication" "m=\$(cat /proc/self/mountinfo) && ! grep -qF ' $staging ' <<<\"\$m\""

step "inline ephemeral volume on pool lvm (32Mi)"
pod_apply inl 'echo x > /data/f && echo write-ok; sleep 3600' \
  "flexVolume: {driver: nodevol.io/volume, options: {pool: lvm, size: 32Mi}}"
uid3=$(pod_running inl)
wait_log inl write-ok
name=ephemeral-$uid3-data
node_ctl volume get "$name" >/dev/null || fail "no volume $name while the pod runs: $(node_ctl volume list)"
node_sh "lvs_nv | grep -qx 'nv-$name'" || fail "no LV nv-$name: $(node_sh lvs_nv)"
lv_mounted "$(target "$uid3" data)" "nv-$name" >&2 || fail "the inline volume's target is not its LV"
pod_delete inl
gone_after_pod "$uid3" data
# Each negative check looks at what its tool printed and fails when the
# tool itself fails (a daemon that does not answer lists nothing either).
node_wait 60 "volume $name deleted" "l=\$(ctl volume list) && ! grep -q '$name' <<<\"\$l\""
node_sh "l=\$(lvm lvs --noheadings -o lv_name nv) && ! grep -q '$name' <<<\"\$l\"" || fail "LV nv-$name still there, or lvs failed: $(node_sh lvs_nv)"
node_sh "m=\$(cat /proc/self/mountinfo) && ! grep -qF ' /var/lib/nvk8s/nodevol/staging/lvm/$name ' <<<\"\$m\"" || fail "staging mount of $name left"

# --- The CSI front door on the same node, beside the flexVolume PV above.
step "CSI: CSIDriver applied; CSINode lists nodevol.io"
k apply -f "$(dirname "$0")/../../deploy/base/csidriver.yaml" >/dev/null || fail "apply the CSIDriver"
keys=
for _ in $(seq 120); do
  keys=$(k get csinode "$K8S_NODE" -o jsonpath='{.spec.drivers[?(@.name=="nodevol.io")].topologyKeys}' 2>/dev/null) || true
  [[ -n $keys ]] && break; sleep 0.5
done
[[ $keys == *topology.nodevol.io/node* ]] || fail "CSINode $K8S_NODE lists no nodevol.io (got '$keys')"

step "CSI raw block: LV blk1 (32Mi, --block), PV pv-blk1 (spec.csi, volumeMode Block), PVC c-blk1"
node_ctl volume create blk1 --pool lvm --size 32Mi --block --param nodevol.io/pvc-namespace=default >/dev/null \
  || fail "volume create blk1 --block"
k apply -f - >/dev/null <<YAML || fail "apply PV/PVC blk1"
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-blk1}
spec:
  capacity: {storage: 32Mi}
  accessModes: [ReadWriteOnce]
  volumeMode: Block
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  csi: {driver: nodevol.io, volumeHandle: blk1, volumeAttributes: {pool: lvm}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: c-blk1}
spec:
  accessModes: [ReadWriteOnce]
  volumeMode: Block
  storageClassName: ""
  volumeName: pv-blk1
  resources: {requests: {storage: 32Mi}}
YAML
k wait --for=jsonpath='{.status.phase}'=Bound pvc/c-blk1 --timeout=60s >/dev/null || fail "PVC c-blk1 not Bound"

# block_pod NAME COMMAND: a pod with the raw device of c-blk1 at /dev/xvdb
# and, in the same pod, the flexVolume claim c-lv1 at /data.
block_pod() {
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
    volumeDevices: [{name: blk, devicePath: /dev/xvdb}]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - {name: blk, persistentVolumeClaim: {claimName: c-blk1}}
  - {name: data, persistentVolumeClaim: {claimName: c-lv1}}
YAML
}
blk_publish() { echo "${K8S_PODS_ROOT%/pods}/plugins/kubernetes.io/csi/volumeDevices/publish/pv-blk1/$1"; }

step "pod blk writes at 1 MiB into the raw device and reads the flexVolume claim"
block_pod blk 'printf hello-block | dd of=/dev/xvdb bs=1M seek=1 conv=fsync 2>/dev/null && echo write-ok; cat /data/f; sleep 3600'
uid4=$(pod_running blk)
wait_log blk write-ok
wait_log blk hello-lvm
p=$(blk_publish "$uid4")
node_sh "[[ -b '$p' ]] && [[ \$(stat -c %t:%T '$p') == \$(stat -L -c %t:%T /dev/nv/nv-blk1) ]]" \
  || fail "kubelet's publish path $p is not the LV's device: $(node_sh "ls -l '$p' /dev/nv/nv-blk1; findmnt -n '$p'" 2>&1)"
got=$(node_sh "dd if=/dev/nv/nv-blk1 iflag=skip_bytes skip=1048576 bs=11 count=1 status=none")
[[ $got == hello-block ]] || fail "the LV does not hold what the pod wrote (got '$got')"
node_sh "lvm lvs --noheadings -o lv_name,lv_tags nv/nv-blk1" >&2
va=$(k get volumeattachments -o name) || fail "listing VolumeAttachments"
[[ -z $va ]] || fail "a VolumeAttachment was made: $va"

step "pod blk deleted: the publish file is gone, the LV stays; a new pod reads the device"
pod_delete blk
node_wait 120 "publish file $p removed" "[[ ! -e '$p' ]]"
node_wait 120 "pod directory $K8S_PODS_ROOT/$uid4 removed" "[[ ! -e '$K8S_PODS_ROOT/$uid4' ]]"
node_sh 'lvs_nv | grep -qx nv-blk1' || fail "the block LV went with the pod"
block_pod blk 'dd if=/dev/xvdb bs=1M skip=1 count=1 2>/dev/null | head -c 11; echo; sleep 3600'
uid5=$(pod_running blk)
wait_log blk hello-block
pod_delete blk
node_wait 120 "publish file removed" "[[ ! -e '$(blk_publish "$uid5")' ]]"
node_sh "m=\$(cat /proc/self/mountinfo) && ! grep -qF 'volumeDevices' <<<\"\$m\"" \
  || fail "a block bind left: $(node_sh "grep volumeDevices /proc/self/mountinfo")"
step "PASS"
