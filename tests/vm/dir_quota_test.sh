#!/bin/bash
# Runs inside a vm-run guest (tests/vm/CMakeLists.txt): project quotas of the
# dir backend on a real filesystem, through the real nodevold and nodevolctl.
#   dir_quota_test.sh ext4|xfs     disks: "pool" (>= 512M), "plain" (>= 512M)
# Needs NODEVOLD and NODEVOLCTL in the environment.
source "$VM_LIB"

fs=${1:?usage: dir_quota_test.sh ext4|xfs}
MiB=$((1024 * 1024))

# bytes_of PATH: statfs size of the filesystem as seen at PATH (what df and
# kubelet's volume metrics report).
bytes_of() { echo $(($(stat -f -c '%b' "$1") * $(stat -f -c '%S' "$1"))); }

# fill FILE MIB: appends MIB MiB of zeros with fsync; prints dd's error line
# on failure and returns dd's status. It writes as a pod's root does: uid 0
# without CAP_SYS_RESOURCE (container runtimes drop it), since a holder of
# CAP_SYS_RESOURCE is exempt from ext4's (VFS) quota hard limits.
fill() {
  local out rc=0
  out=$(setpriv --bounding-set=-sys_resource --inh-caps=-sys_resource -- dd if=/dev/zero of="$1" bs=1M count="$2" oflag=append conv=notrunc,fsync 2>&1) || rc=$?
  ((rc == 0)) || grep -v records <<<"$out" | head -2
  return $rc
}

vm_step "$fs with project quotas on disk 'pool', mounted prjquota"
vm_mkfs_mount "$fs" pool /mnt/pool prjquota
mkdir -p /mnt/pool/a /mnt/pool/b  # pools "quota" and, later, "other": one filesystem
# The trap: ext4 made with -O quota,project accounts project usage on every
# mount but enforces limits only when mounted prjquota; xfs mounted
# pqnoenforce accounts without enforcing. Neither may count as enforced.
vm_step "$fs accounting project usage without enforcing limits on disk 'plain'"
mkdir -p /mnt/plain
if [[ $fs == ext4 ]]; then
  vm_run mkfs.ext4 -q -F -O quota,project "$(vm_disk plain)"
  vm_run mount -t ext4 "$(vm_disk plain)" /mnt/plain
else
  vm_run mkfs.xfs -q -f -K "$(vm_disk plain)"
  vm_run mount -t xfs -o pqnoenforce "$(vm_disk plain)" /mnt/plain
fi

start_plain() {  # $1 = quota mode; runs nodevold on /mnt/plain for a moment
  local sb=/run/nv-plain-$1
  mkdir -p $sb/pods $sb/state
  : >$sb/conf
  timeout -s TERM 20 "$NODEVOLD" --config=$sb/conf --socket=$sb/s --state-dir=$sb/state \
    --pods-root=$sb/pods --metrics-address=off --log-target=stderr \
    --pool=name=plain,backend=dir,path=/mnt/plain,quota="$1" >$sb/log 2>&1 &
  local pid=$!
  for _ in $(seq 200); do [[ -S $sb/s ]] || ! kill -0 $pid 2>/dev/null && break; sleep 0.1; done
  kill -TERM $pid 2>/dev/null || true
  wait $pid || true
  cat $sb/log
}

vm_step "quota=required refuses a pool whose limits are not enforced, saying how to fix it"
out=$(start_plain required)
grep -q "critical cannot start" <<<"$out" || vm_fail "nodevold started with quota=required on a pool without enforcement: $out"
vm_log "$(grep "cannot start" <<<"$out")"
grep -q "prjquota" <<<"$out" || vm_fail "the refusal does not say how to fix it (mount with prjquota): $out"

vm_step "quota=auto on the same pool: size not enforced"
out=$(start_plain auto)
grep -q "size-enforced=false" <<<"$out" || vm_fail "quota=auto claims enforcement without it: $(grep 'pool plain' <<<"$out")"
vm_log "$(grep 'pool plain' <<<"$out")"

vm_step "nodevold with quota=required on the prjquota pool"
VM_SANDBOX=/run/nodevol-vm
vm_nodevold_start --pool=name=quota,backend=dir,path=/mnt/pool/a,quota=required
info=$(vm_ctl info)
grep -q "quota=project" <<<"$info" || vm_fail "pool does not report quota=project: $info"
vm_log "pool attributes: $(grep '^quota' <<<"$info")"

vm_step "create a 10 MiB volume and publish it into a pod"
vm_run vm_ctl volume create v1 --pool quota --size 10Mi
json=$(vm_ctl -o json volume get v1)
pid1=$(vm_json_get "$json" project_id)
[[ -n $pid1 ]] || vm_fail "volume v1 has no project_id attribute: $json"
vm_log "project id $pid1"
t1=$(vm_target pod-1 v1)
vm_run vm_ctl publish --volume v1 --target "$t1"
grep -q " $t1 " /proc/self/mountinfo || vm_fail "$t1 is not a mount point"

vm_step "statfs of the target reports the quota, 10 MiB"
size=$(bytes_of "$t1")
vm_log "df: $(df -h "$t1" | tail -1)"
((size == 10 * MiB)) || vm_fail "statfs of $t1 reports $size bytes, want $((10 * MiB))"
stats=$(vm_ctl -o json stats --target "$t1")
total=$(vm_json_get "$stats" total_bytes)
((total == 10 * MiB)) || vm_fail "nodevolctl stats total_bytes=$total, want $((10 * MiB)): $stats"

vm_step "writing 20 MiB into the 10 MiB volume fails near 10 MiB"
mkdir "$t1/sub"  # inherits the project: usage below it counts too
if err=$(fill "$t1/sub/fill" 20); then
  vm_fail "wrote 20 MiB into a 10 MiB volume: the quota is not enforced ($(du -sh "$t1"))"
fi
vm_log "dd: $err"
grep -qE "Disk quota exceeded|No space left on device" <<<"$err" || vm_fail "unexpected error: $err"
written=$(stat -c %s "$t1/sub/fill")
vm_log "written before the error: $written bytes"
((written >= 9 * MiB && written <= 10 * MiB)) || vm_fail "stopped after $written bytes, want 9..10 MiB"
stats=$(vm_ctl -o json stats --target "$t1")
used=$(vm_json_get "$stats" used_bytes)
vm_log "stats used_bytes=$used"
((used >= 9 * MiB && used <= 10 * MiB)) || vm_fail "stats used_bytes=$used, want 9..10 MiB"

vm_step "a second volume has its own project and limit"
vm_run vm_ctl volume create v2 --pool quota --size 10Mi
pid2=$(vm_json_get "$(vm_ctl -o json volume get v2)" project_id)
[[ -n $pid2 && $pid2 != "$pid1" ]] || vm_fail "v2 project id '$pid2' (v1: $pid1)"
t2=$(vm_target pod-2 v2)
vm_run vm_ctl publish --volume v2 --target "$t2"
fill "$t2/data" 5 >/dev/null || vm_fail "cannot write 5 MiB into the fresh 10 MiB volume v2"
vm_log "wrote 5 MiB into v2 (project $pid2)"

vm_step "expand v1 to 40 MiB while published: statfs follows, 20 MiB more fits"
vm_run vm_ctl volume expand v1 --size 40Mi
size=$(bytes_of "$t1")
((size == 40 * MiB)) || vm_fail "after expand statfs reports $size bytes, want $((40 * MiB))"
err=$(fill "$t1/sub/more" 20) || vm_fail "writing 20 MiB after expanding to 40 MiB failed: $err"
used=$(vm_json_get "$(vm_ctl -o json stats --target "$t1")" used_bytes)
vm_log "df: $(df -h "$t1" | tail -1); stats used_bytes=$used"
((used >= 29 * MiB && used <= 31 * MiB)) || vm_fail "used_bytes=$used after ~30 MiB written"
err=$(fill "$t1/sub/more" 20) && vm_fail "wrote past the expanded 40 MiB limit"
vm_log "and 20 MiB more stops at the new limit: $err"
rm -f "$t1/sub/more"

vm_step "capacity of the pool: the filesystem's size, 50 MiB allocated"
cap=$(vm_ctl -o json capacity)
ctotal=$(vm_json_get "$cap" total_bytes) calloc=$(vm_json_get "$cap" allocated_bytes)
vm_log "total_bytes=$ctotal allocated_bytes=$calloc free_bytes=$(vm_json_get "$cap" free_bytes)"
((calloc == 50 * MiB)) || vm_fail "allocated_bytes=$calloc, want $((50 * MiB))"
fsbytes=$(($(stat -f -c '%b' /mnt/pool/a) * $(stat -f -c '%S' /mnt/pool/a)))
((ctotal == fsbytes)) || vm_fail "capacity total_bytes=$ctotal, the filesystem has $fsbytes"

vm_step "the limits survive a daemon restart (now with a second pool on the same filesystem)"
vm_nodevold_stop
vm_nodevold_start --pool=name=quota,backend=dir,path=/mnt/pool/a,quota=required \
  --pool=name=other,backend=dir,path=/mnt/pool/b,quota=required
size=$(bytes_of "$t1")
((size == 40 * MiB)) || vm_fail "after restart statfs reports $size bytes"
pid1b=$(vm_json_get "$(vm_ctl -o json volume get v1)" project_id)
[[ $pid1b == "$pid1" ]] || vm_fail "project id changed across restart: $pid1 -> $pid1b"

# Project ids are per filesystem, not per pool directory: a volume of
# another pool on the same filesystem must not share (and re-limit) one.
vm_step "a volume of the other pool gets a project id of its own"
vm_run vm_ctl volume create v3 --pool other --size 20Mi
pid3=$(vm_json_get "$(vm_ctl -o json volume get v3)" project_id)
vm_log "project ids: v1=$pid1 v2=$pid2 v3=$pid3"
[[ -n $pid3 && $pid3 != "$pid1" && $pid3 != "$pid2" ]] || vm_fail "v3 (pool other) got project id $pid3 (v1: $pid1, v2: $pid2)"
size=$(bytes_of "$t1")
((size == 40 * MiB)) || vm_fail "creating v3 in pool other changed v1's limit: statfs $size bytes"
t3=$(vm_target pod-3 v3)
vm_run vm_ctl publish --volume v3 --target "$t3"
size=$(bytes_of "$t3")
((size == 20 * MiB)) || vm_fail "v3 statfs reports $size bytes, want $((20 * MiB))"
used=$(vm_json_get "$(vm_ctl -o json stats --target "$t3")" used_bytes)
((used < MiB)) || vm_fail "the fresh v3 already uses $used bytes (shares another volume's project?)"

# Snapshots of a dir pool are copies (docs/snapshots.md); with quotas each
# copy is charged to a project of its own from its first byte, so neither
# a snapshot nor a restore escapes the accounting, and a restore is
# limited to the size asked for.
vm_step "snapshot s2 of v2 (5 MiB written): a copy in a project of its own"
vm_run vm_ctl snapshot create s2 --volume v2
spid=$(vm_json_get "$(vm_ctl -o json snapshot get s2)" project_id)
[[ -n $spid && $spid != "$pid2" && $spid != "$pid1" && $spid != "$pid3" ]] ||
  vm_fail "snapshot s2 project id '$spid' (v1 $pid1, v2 $pid2, v3 $pid3)"
cmp "$t2/data" /mnt/pool/a/.snapshots/s2/data || vm_fail "the snapshot's copy differs from v2's data"
fill "$t2/data" 2 >/dev/null || vm_fail "cannot write 2 MiB more into v2"

vm_step "restore r2 (12 MiB) from s2: the data as of the snapshot, charged and limited from the first byte"
vm_run vm_ctl volume create r2 --pool quota --size 12Mi --from-snapshot s2
rpid=$(vm_json_get "$(vm_ctl -o json volume get r2)" project_id)
[[ -n $rpid && $rpid != "$spid" && $rpid != "$pid2" ]] || vm_fail "r2 project id '$rpid' (s2 $spid, v2 $pid2)"
tr2=$(vm_target pod-4 r2)
vm_run vm_ctl publish --volume r2 --target "$tr2"
size=$(bytes_of "$tr2")
((size == 12 * MiB)) || vm_fail "r2 statfs reports $size bytes, want $((12 * MiB))"
rsize=$(stat -c %s "$tr2/data")
((rsize == 5 * MiB)) || vm_fail "r2's data is $rsize bytes, want the snapshot's $((5 * MiB)) (v2 has 7 MiB now)"
used=$(vm_json_get "$(vm_ctl -o json stats --target "$tr2")" used_bytes)
((used >= 5 * MiB && used <= 6 * MiB)) || vm_fail "r2 used_bytes=$used: the copy is not charged to r2's project"
err=$(fill "$tr2/data" 10) && vm_fail "wrote 10 MiB more into the 12 MiB restore holding 5"
vm_log "r2: 10 MiB more stops at its limit: $err"

vm_step "clone c2 of v2 (7 MiB now) at 10 MiB; a clone at 6 MiB is refused (smaller than v2)"
vm_run vm_ctl volume create c2 --pool quota --size 10Mi --from-volume v2
csize=$(stat -c %s /mnt/pool/a/c2/data)
((csize == 7 * MiB)) || vm_fail "c2's data is $csize bytes, want v2's $((7 * MiB))"
vm_ctl volume create c3 --pool quota --size 6Mi --from-volume v2 2>/dev/null && vm_fail "a 6 MiB clone of a 10 MiB volume was made"
[[ ! -e /mnt/pool/a/c3 && ! -e /mnt/pool/a/.making-c3 ]] || vm_fail "the refused clone c3 left a directory"
vm_run vm_ctl unpublish --target "$tr2"
vm_run vm_ctl volume delete r2
vm_run vm_ctl volume delete c2
vm_run vm_ctl snapshot delete s2

# Issue 69 item 6: a copy writes every hard link in full, and the quota
# usage of its source counts the file once; the check before the first
# byte counts as the copy will write.
vm_step "v2 (10 MiB) with 3 more links to its 7 MiB file: its copy would be 28 MiB; the snapshot is refused up front"
for i in 1 2 3; do ln "$t2/data" "$t2/link-$i"; done
err=$(vm_ctl snapshot create s-links --volume v2 2>&1) && vm_fail "a snapshot whose copy is 28 MiB of a 10 MiB volume was made"
[[ $err == *"hard links are copied as separate files"* ]] || vm_fail "the refusal does not say why: $err"
[[ ! -e /mnt/pool/a/.snapshots/s-links && ! -e /mnt/pool/a/.snapshots/.making-s-links ]] ||
  vm_fail "the refused snapshot left a copy"
vm_ctl snapshot get s-links >/dev/null 2>&1 && vm_fail "the refused snapshot is listed"
vm_log "refused: $(tail -1 <<<"$err")"
rm -f "$t2"/link-*

vm_step "the copy's thread lacks CAP_SYS_RESOURCE: on $fs a write charged to a project stops at its hard limit"
NODEVOL_REAL_QUOTA_DIR=/mnt/pool vm_gtest 'RealQuota.*'

vm_step "unpublish and delete"
vm_run vm_ctl unpublish --target "$t1"
vm_run vm_ctl unpublish --target "$t2"
vm_run vm_ctl unpublish --target "$t3"
vm_run vm_ctl volume delete v1
vm_run vm_ctl volume delete v2
vm_run vm_ctl volume delete v3
left=$(ls -A /mnt/pool/a /mnt/pool/b /mnt/pool/a/.snapshots | grep -v -e ':$' -e '^$' -e '^\.snapshots$' || true)
[[ -z $left ]] || vm_fail "pools not empty after deletes: $left"
vm_nodevold_stop
vm_step "PASS ($fs)"
