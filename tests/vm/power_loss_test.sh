#!/bin/bash
# Runs inside a vm-run guest, twice (tests/vm/power_loss_run: vm_power_loss):
# a power loss under live pods, then the next boot on the same disks.
#   before: nodevold with its state dir, kubelet's pods dir and a dir pool
#           on the "persist" disk, an LVM pool on "lvm1"; a persistent LVM
#           volume, a persistent dir volume and an inline volume published
#           into three pods, each pod writing (and syncing) a file; then the
#           power is cut (sysrq b: no sync, no unmount).
#   after:  the disks as the power loss left them; nodevold starts (the
#           mounts are gone, the records are not) and kubelet's calls are
#           replayed: republish each pod, unpublish each, delete the volumes.
#           Checked: no volume lost, every pod's synced file reads back
#           (the inline volume is never deleted and re-made empty), the
#           re-made LVM bind is nosuid,nodev like its staging mount (flags
#           taken after Stage, issue 29.5), and nothing is left behind.
#   power_loss_test.sh before|after   disks: persist, lvm1
source "$VM_LIB"

phase=${1:?before or after}
MiB=$((1024 * 1024))
persist=/persist
export VM_SANDBOX=$persist/sandbox
pools=(--pool=name=dir,backend=dir,path=$persist/pool,inline=on
       "--pool=name=fast,backend=lvm,vg=nv,type=thick,fs=ext4,devices=$(vm_disk lvm1)")
declare -A data=([pod-a]="lvm volume data" [pod-b]="dir volume data" [pod-c]="inline volume data")

# per_mount_opts PATH: the per-mount options of the mount at PATH.
per_mount_opts() {
  local id parent dev root mp opts rest
  while read -r id parent dev root mp opts rest; do [[ $mp == "$1" ]] && o=$opts; done </proc/self/mountinfo
  echo "${o:-}"
}
expect_hardened() {
  local opts
  opts=$(per_mount_opts "$1")
  [[ ,$opts, == *,nosuid,* && ,$opts, == *,nodev,* ]] || vm_fail "$1 is mounted $opts: lacks nosuid,nodev of its staging mount"
}
publish() {  # pod, then nodevolctl publish arguments; prints the volume's name
  local out
  out=$(vm_ctl -o json publish --target "$(vm_target "$1" data)" "${@:2}" 2>&1) ||
    vm_fail "publish for $1 failed: $out"
  vm_json_get "$out" volume
}

if [[ $phase == before ]]; then
  vm_step "boot 1: state dir, pods dir and dir pool on a disk; an LVM pool"
  vm_mkfs_mount ext4 persist $persist
  mkdir -p $persist/pool
  vm_nodevold_start "${pools[@]}"
  vm_run vm_ctl volume create v-lvm --pool fast --size 32Mi
  vm_run vm_ctl volume create v-dir --pool dir --size 16Mi
  publish pod-a --volume v-lvm >/dev/null
  publish pod-b --volume v-dir >/dev/null
  expect_hardened "$VM_PODS/pod-a/volumes/nodevol.io~volume/data"
  for pod in pod-a pod-b; do
    printf '%s\n' "${data[$pod]}" | dd of="$VM_PODS/$pod/volumes/nodevol.io~volume/data/file" conv=fsync status=none
  done
  sync  # the node has run a while: all of this is on disk

  vm_step "an inline volume published just before the power goes"
  name=$(publish pod-c --inline-pool dir --inline-size 16Mi)
  [[ -n $name ]] || vm_fail "no inline volume name"
  printf '%s\n' "$name" >"$VM_OUT/notes"
  printf '%s\n' "${data[pod-c]}" | dd of="$VM_PODS/pod-c/volumes/nodevol.io~volume/data/file" conv=fsync status=none
  vm_log "inline volume $name"
  echo 1 >/proc/sys/kernel/sysrq
  echo POWER-CUT
  echo b >/proc/sysrq-trigger
  sleep 60
  vm_fail "the guest is still running after sysrq b"
fi

[[ $phase == after ]] || vm_fail "phase must be before or after, not $phase"
inline=$(<"${POWER_NOTES:?}")
vm_step "boot 2: the same disks after the power loss (inline volume $inline)"
mkdir -p $persist
vm_run mount -t ext4 "$(vm_disk persist)" $persist
rm -f "$VM_SANDBOX/nodevold.sock"  # a socket file outlives its server
vm_nodevold_start "${pools[@]}"
vm_log "drift: $(vm_ctl info 2>&1 | tr '\n' ' ')"
list=$(vm_ctl volume list)
for v in v-lvm v-dir "$inline"; do
  grep -q "$v" <<<"$list" || vm_fail "volume $v is gone after the power loss: $list"
done
# The reconcile re-made the binds of the published records; the LVM one
# must carry its staging mount's nosuid,nodev.
a=$VM_PODS/pod-a/volumes/nodevol.io~volume/data
if grep -q " $a " /proc/self/mountinfo; then expect_hardened "$a"; else vm_log "pod-a: bind not re-made at start"; fi

vm_step "kubelet replays its calls: republish every pod"
[[ $(publish pod-a --volume v-lvm) == v-lvm ]] || vm_fail "republish of pod-a"
[[ $(publish pod-b --volume v-dir) == v-dir ]] || vm_fail "republish of pod-b"
[[ $(publish pod-c --inline-pool dir --inline-size 16Mi) == "$inline" ]] || vm_fail "republish of pod-c"
expect_hardened "$a"
for pod in pod-a pod-b pod-c; do
  f=$VM_PODS/$pod/volumes/nodevol.io~volume/data/file
  [[ -f $f && $(<"$f") == "${data[$pod]}" ]] || vm_fail "$pod: its synced file is lost after the power loss (got '$(cat "$f" 2>&1)')"
done
vm_log "every pod's data is back"

vm_step "kubelet tears the pods down; the volumes are deleted"
for pod in pod-a pod-b pod-c; do
  vm_run vm_ctl unpublish --target "$VM_PODS/$pod/volumes/nodevol.io~volume/data"
done
vm_run vm_ctl volume delete v-lvm
vm_run vm_ctl volume delete v-dir
list=$(vm_ctl volume list)
[[ -z $(grep -E "v-lvm|v-dir|$inline" <<<"$list") ]] || vm_fail "volumes left: $list"
grep -q " $VM_SANDBOX/" /proc/self/mountinfo && vm_fail "mounts left: $(grep " $VM_SANDBOX/" /proc/self/mountinfo)"
[[ -z $(ls -A $persist/pool) ]] || vm_fail "pool dir not empty: $(ls -A $persist/pool)"
lvs=$(lvm lvs --noheadings -o lv_name nv 2>&1 | tr -d ' ')
[[ -z $lvs ]] || vm_fail "LVs left: $lvs"
vm_nodevold_stop
echo "power loss: OK"
