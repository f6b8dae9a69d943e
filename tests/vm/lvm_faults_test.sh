#!/bin/bash
# Runs inside a vm-run guest (tests/vm/CMakeLists.txt: vm_lvm_faults): the
# disks under an LVM pool misbehave while nodevold works on them. Each PV
# is a device-mapper device over a virtio disk, as xfstests does with
# dm-error: its table is swapped under the running pool.
#   1. I/O errors past 100 MiB of the PV: mkfs of a new volume fails.
#   2. The PV suspended (every I/O waits): lvcreate hangs past nodevold's
#      deadline (--lvm-timeout-seconds=5).
#   3. The new LV suspended the moment lvcreate makes it: lvcreate or mkfs
#      hangs after the LV exists.
#   4. The disk of a second pool pulled (virtio hot-unplug) under a
#      published volume, nodevold restarted meanwhile, the disk put back.
# For each: what the caller is told, that the other pools and volumes keep
# working, that nothing is half done or leaked (record, LV, mount) and that
# the same call succeeds once the fault clears.
#   lvm_faults_test.sh      disks: lvm1 (512M); lvm2 (128M) hot-plugged here
source "$VM_LIB"

export DM_DISABLE_UDEV=1  # for the lvm commands this script runs itself
MiB=$((1024 * 1024))

# lvm sees the wrapped disk only through its dm device (else the PV shows
# twice); every other disk as it is.
raw1=$(vm_disk lvm1)
mkdir -p /etc/lvm
cat >/etc/lvm/lvm.conf <<EOF
devices {
  global_filter = [ "r|^$raw1\$|", "a|.*|" ]
}
EOF
sectors1=$(blockdev --getsz "$raw1")
vm_run dmsetup create nvpv1 --table "0 $sectors1 linear $raw1 0"
vm_run lvm pvcreate -q -y /dev/mapper/nvpv1
vm_run lvm vgcreate -q nv /dev/mapper/nvpv1

# pv_table TABLE: swaps nvpv1's table (suspend, reload, resume).
pv_table() {
  dmsetup suspend nvpv1 && dmsetup reload nvpv1 --table "$1" && dmsetup resume nvpv1 ||
    vm_fail "could not swap nvpv1's table to: $1"
}
pv_linear() { pv_table "0 $sectors1 linear $raw1 0"; }

# The second pool's disk, hot-plugged so that it can be pulled.
raw2=$(vm_hotplug_disk lvm2 128M)
vm_run lvm pvcreate -q -y "$raw2"
vm_run lvm vgcreate -q nvx "$raw2"

mkdir -p /run/dirpool
pools=(--pool=name=fast,backend=lvm,vg=nv,type=thick,fs=ext4 --pool=name=other,backend=lvm,vg=nvx,type=thick
       --pool=name=dir,backend=dir,path=/run/dirpool)
vm_nodevold_start --lvm-timeout-seconds=5 --mkfs-timeout-seconds=5 "${pools[@]}"

now() { cut -d' ' -f1 /proc/uptime; }
since() { awk -v t0="$1" -v t1="$(now)" 'BEGIN {printf "%.1f", t1 - t0}'; }
# try_create NAME POOL SIZE: CreateVolume; OUT = nodevolctl's output, RC its exit, TOOK seconds.
try_create() {
  local t0
  t0=$(now)
  RC=0
  OUT=$(vm_ctl volume create "$1" --pool "$2" --size "$3" 2>&1) || RC=$?
  TOOK=$(since "$t0")
}
# Every LV tagged with this volume.
lvs_of() { lvm lvs --noheadings -o lv_name,lv_tags 2>/dev/null | awk -v t="nodevol.io/volume=$1" 'index($2, t) {print $1}' | xargs; }
listed() { vm_ctl volume list 2>/dev/null | grep -qw "$1"; }
# expect_nothing_of NAME: no record, no LV, no staging mount.
expect_nothing_of() {
  ! listed "$1" || vm_fail "volume $1 is listed after its create failed: $(vm_ctl volume list)"
  [[ -z $(lvs_of "$1") ]] || vm_fail "LV $(lvs_of "$1") of volume $1 is left after its create failed"
  ! grep -q "/staging/fast/$1 " /proc/self/mountinfo || vm_fail "a staging mount of $1 is left"
}
# expect_ok_data POD: the pod's file reads back and a new write syncs.
expect_ok_data() {
  local f=$VM_PODS/$1/volumes/nodevol.io~volume/data/file
  [[ $(<"$f") == "data of $1" ]] || vm_fail "$1's data does not read back: $(cat "$f" 2>&1)"
  dd if=/dev/zero of="${f}2" bs=4k count=16 conv=fsync status=none || vm_fail "$1 cannot write its volume"
}
publish_with_data() {  # POD VOLUME
  vm_run vm_ctl publish --target "$(vm_target "$1" data)" --volume "$2" >/dev/null
  echo "data of $1" | dd of="$VM_PODS/$1/volumes/nodevol.io~volume/data/file" conv=fsync status=none
}

vm_step "a volume in use on the pool, at the start of the PV"
vm_run vm_ctl volume create v-ok --pool fast --size 32Mi
publish_with_data pod-ok v-ok
vm_log "LVs: $(lvm lvs --noheadings -o lv_name,seg_pe_ranges nv | xargs)"

vm_step "1. the PV fails every I/O past 100 MiB: the next volume's mkfs fails"
good=$((100 * 2048))
pv_table "0 $good linear $raw1 0
$good $((sectors1 - good)) error"
try_create v-bad fast 200Mi
vm_log "create: exit $RC after ${TOOK}s: $OUT"
((RC != 0)) || vm_fail "CreateVolume succeeded on a failing disk"
grep -q "mkfs.ext4\|I/O error\|Input/output" <<<"$OUT" || vm_fail "the error does not say what failed: $OUT"
expect_nothing_of v-bad
expect_ok_data pod-ok
vm_log "kernel: $(dmesg | grep -m1 -i 'error' || true)"
pv_linear
try_create v-bad fast 200Mi
((RC == 0)) || vm_fail "the same create after the disk recovered: $OUT"
vm_run vm_ctl volume delete v-bad
expect_nothing_of v-bad

vm_step "2. the PV suspended (every I/O waits): lvcreate hangs past the 5 s deadline"
vm_run dmsetup suspend nvpv1
try_create v-hang fast 32Mi
vm_log "create: exit $RC after ${TOOK}s: $OUT"
((RC != 0)) || vm_fail "CreateVolume succeeded on a suspended disk"
grep -qi "timed out\|deadline" <<<"$OUT" || vm_fail "the error does not say lvm timed out: $OUT"
vm_log "the dir pool meanwhile:"
t0=$(now)
vm_run vm_ctl volume create d-1 --pool dir --size 16Mi
vm_run vm_ctl publish --target "$(vm_target pod-d data)" --volume d-1
vm_log "dir create + publish during the hang: $(since "$t0")s"
vm_log "state of v-hang: $(vm_ctl volume list 2>&1 | grep v-hang || echo 'no record')"
ps -eo pid,stat,etimes,cmd | grep '[l]vm ' | sed 's/^/    stuck: /' || true
vm_run dmsetup resume nvpv1
for _ in $(seq 100); do pgrep -x lvm >/dev/null || break; sleep 0.1; done
! pgrep -x lvm >/dev/null || vm_fail "lvm processes still running after the resume: $(pgrep -a lvm)"
vm_log "after the resume: v-hang $(vm_ctl volume list 2>&1 | grep v-hang || echo 'no record'), LVs '$(lvs_of v-hang)'"
try_create v-hang fast 32Mi
((RC == 0)) || vm_fail "the same create after the disk came back: $OUT"
vm_log "retried in ${TOOK}s"
vm_run vm_ctl volume delete v-hang
expect_nothing_of v-hang

vm_step "3. the new LV suspended as soon as lvcreate makes it: the create hangs after the LV exists"
(
  for _ in $(seq 2000); do
    dm=$(dmsetup ls 2>/dev/null | awk '$1 ~ /^nv-nv--v--late/ {print $1}')
    if [[ -n $dm ]]; then dmsetup suspend --noflush "$dm" && echo "suspended $dm" >/run/late-suspended; exit 0; fi
    sleep 0.005
  done
) &
watcher=$!
try_create v-late fast 32Mi
wait $watcher || true
vm_log "$(cat /run/late-suspended 2>/dev/null || echo 'the LV never appeared')"
vm_log "create: exit $RC after ${TOOK}s: $OUT"
((RC != 0)) || vm_fail "CreateVolume succeeded on a suspended LV"
vm_log "state: $(vm_ctl volume list 2>&1 | grep v-late || echo 'no record'), LVs '$(lvs_of v-late)'"
for dm in $(dmsetup ls | awk '$1 ~ /^nv-nv--v--late/ {print $1}'); do vm_run dmsetup resume "$dm"; done
for _ in $(seq 100); do pgrep -x 'lvm|mkfs.ext4' >/dev/null || break; sleep 0.1; done
vm_log "after the resume: $(vm_ctl volume list 2>&1 | grep v-late || echo 'no record'), LVs '$(lvs_of v-late)'"
try_create v-late fast 32Mi
((RC == 0)) || vm_fail "the same create after the LV was resumed: $OUT"
publish_with_data pod-late v-late
expect_ok_data pod-late
vm_run vm_ctl unpublish --target "$VM_PODS/pod-late/volumes/nodevol.io~volume/data"
vm_run vm_ctl volume delete v-late
expect_nothing_of v-late

vm_step "4. the disk of pool other pulled under a published volume"
vm_run vm_ctl volume create v-x --pool other --size 32Mi
publish_with_data pod-x v-x
vm_unplug_disk lvm2
vm_log "pulled $raw2"
x=$VM_PODS/pod-x/volumes/nodevol.io~volume/data
if dd if=/dev/zero of="$x/after-pull" bs=4k count=16 conv=fsync status=none 2>/dev/null; then
  vm_log "pod-x: a write after the pull still succeeded (cached)"
else
  vm_log "pod-x: writes fail, as they must"
fi
expect_ok_data pod-ok
vm_log "capacity: $(vm_ctl capacity 2>&1 | tr '\n' ' ')"
try_create v-y other 16Mi
vm_log "create in pool other: exit $RC after ${TOOK}s: $OUT"
((RC != 0)) || vm_fail "CreateVolume succeeded in a pool whose disk is gone"
expect_nothing_of v-y
try_create v-fine fast 16Mi
((RC == 0)) || vm_fail "a create in pool fast while other's disk is gone: $OUT"

vm_step "nodevold restarted while the disk is gone: no volume lost"
vm_nodevold_stop
vm_nodevold_start --lvm-timeout-seconds=5 --mkfs-timeout-seconds=5 "${pools[@]}"
vm_log "info: $(vm_ctl info 2>&1 | tr '\n' ' ')"
for v in v-ok v-x v-fine; do listed "$v" || vm_fail "volume $v is gone after a restart without pool other's disk"; done
expect_ok_data pod-ok
grep -q " $x " /proc/self/mountinfo || vm_fail "pod-x's publication was not kept"

vm_step "kubelet tears pod-x down while the disk is gone"
try_unpublish() { RC=0; OUT=$(vm_ctl unpublish --target "$1" 2>&1) || RC=$?; }
try_unpublish "$x"
vm_log "unpublish: exit $RC: $OUT"

vm_step "the disk put back"
raw2=$(vm_hotplug_disk lvm2 128M)
vm_log "back as $raw2; lvs: $(lvm lvs --noheadings -o lv_name,lv_attr,devices nvx 2>&1 | xargs)"
((RC == 0)) || { try_unpublish "$x"; vm_log "unpublish again: exit $RC: $OUT"; }
((RC == 0)) || vm_fail "pod-x cannot be unpublished once its disk is back: $OUT"
vm_run vm_ctl publish --target "$(vm_target pod-x2 data)" --volume v-x >/dev/null
f=$VM_PODS/pod-x2/volumes/nodevol.io~volume/data/file
[[ $(<"$f") == "data of pod-x" ]] || vm_fail "v-x's data, synced before the pull, does not read back: $(cat "$f" 2>&1)"
vm_log "v-x's data reads back through a new publication"
vm_run vm_ctl unpublish --target "$VM_PODS/pod-x2/volumes/nodevol.io~volume/data"
vm_run vm_ctl unpublish --target "$VM_PODS/pod-ok/volumes/nodevol.io~volume/data"
for v in v-x v-fine v-ok; do vm_run vm_ctl volume delete "$v"; done
for v in v-x v-fine v-ok; do expect_nothing_of "$v"; done
vm_nodevold_stop

echo "lvm faults: OK"
