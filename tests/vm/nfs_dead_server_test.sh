#!/bin/bash
# Runs inside a vm-run guest (tests/vm/CMakeLists.txt): an NFS server that
# stops answering while nodevold has its export mounted (hard mount, the
# default). Publish of a volume fails within the pool's timeout and then at
# once, the daemon's other calls keep answering, Unpublish still completes;
# when the server is back everything works again; an export re-created on
# the server (ESTALE) is mounted afresh. Needs NODEVOLD and NODEVOLCTL.
source "$VM_LIB"
source "$(dirname "$0")/nfs_lib.sh"

# 15 s, not less: on a loaded host a mount.nfs under TCG has taken over
# 5 s with the server alive, which then counts as unreachable.
timeout=15
vm_step "NFS server, and nodevold with an nfs pool (timeout=$timeout s, hard, actimeo=1) and a dir pool"
nfs_server_start 32m
mkdir -p /var/tmp/local-pool && mount -t tmpfs -o size=64m tmpfs /var/tmp/local-pool
# actimeo=1: cached attributes expire after a second, so any stat(2) of an
# NFS path nodevold made would go to the (dead) server.
pool="--pool=name=shared,backend=nfs,server=127.0.0.1,share=/,timeout=$timeout,mount-options=vers=4.2 hard timeo=10 retrans=1 actimeo=1"
vm_nodevold_start "$pool" --pool=name=local,backend=dir,path=/var/tmp/local-pool
claim() { echo --param nodevol.io/pvc-namespace=ns --param nodevol.io/pvc-name="$1" --param nodevol.io/pv-name="$1"; }
vm_run vm_ctl volume create v1 --pool shared --size 10Mi $(claim v1)
vm_run vm_ctl volume create v2 --pool shared --size 10Mi $(claim v2)
t1=$(vm_target pod-1 v1)
vm_run vm_ctl publish --volume v1 --target "$t1"
echo "written before the outage" >"$t1/f"
sdir_a=$(nfs_staging_mounts | awk '{print $4}')
# v4 has other mount options, so a staging mount of its own (nosharecache:
# options the kernel does not compare, like nconnect, would share v1's
# superblock); a process (an operator's shell, say) has its working
# directory in it.
vm_run vm_ctl volume create v4 --pool shared --size 10Mi $(claim v4) --param mountOptions=nosharecache
t4=$(vm_target pod-4 v4)
vm_run vm_ctl publish --volume v4 --target "$t4"
sdir_b=$(nfs_staging_mounts | awk -v a="$sdir_a" '$4 != a {print $4}')
[[ -n $sdir_a && -n $sdir_b && $(nfs_dev_of "$sdir_a") != $(nfs_dev_of "$sdir_b") ]] ||
  vm_fail "want two staging mounts with their own devices: $(nfs_staging_mounts)"
# That process has a file open there and writes 256 KiB into it while
# the server is away, without sync: the writes sit in the page cache, and
# the flusher (expiry lowered to 1 s) has WRITEs for them in flight when
# nodevold unmounts. A hard mount delivers them when the server is back;
# a forced unmount (umount -f, what nodevold did before issue 30 item 1)
# fails the pending WRITEs with EIO and drops them.
echo 100 >/proc/sys/vm/dirty_expire_centisecs
echo 50 >/proc/sys/vm/dirty_writeback_centisecs
unflushed=$(head -c 262144 /dev/zero | tr '\0' u)
mkfifo /tmp/write-now
(cd "$sdir_b/ns-v4-v4" && exec 3>unflushed && read -r _ </tmp/write-now && printf '%s' "$unflushed" >&3 &&
  exec sleep 600) &
holder=$!

vm_step "the server stops answering; a process writes 256 KiB on v4 without sync"
nfs_server_stop
echo go >/tmp/write-now
sleep 2  # past actimeo (and the flusher's 1 s expiry)
vm_log "the server has $(stat -c %s "$NFS_EXPORT/ns-v4-v4/unflushed") bytes of that file"

vm_step "Publish of another volume fails within the timeout; meanwhile the daemon answers"
t2=$(vm_target pod-2 v2)
start=$(now_ms)
(set +e; vm_ctl --timeout 60 publish --volume v2 --target "$t2" >/tmp/publish-v2.out 2>&1; echo $? >/tmp/publish-v2.rc) &
publish_pid=$!
sleep 0.5
s=$(now_ms)
vm_run vm_ctl info >/dev/null
took=$(($(now_ms) - s))
vm_log "GetInfo during the stuck Publish: $took ms"
kill -0 "$publish_pid" 2>/dev/null || vm_fail "GetInfo answered only after the stuck Publish ended ($took ms)"
s=$(now_ms)
tl=$(vm_target pod-l local1)
vm_run vm_ctl volume create local1 --pool local --size 10Mi
vm_run vm_ctl publish --volume local1 --target "$tl"
echo ok >"$tl/x"
vm_run vm_ctl unpublish --target "$tl"
vm_run vm_ctl volume delete local1
took=$(($(now_ms) - s))
vm_log "dir pool create+publish+unpublish+delete during the stuck Publish: $took ms"
for m in CreateVolume Publish Unpublish DeleteVolume; do
  d=$(daemon_ms "$m" local1)
  ((d < 3000)) || vm_fail "the dir pool's $m took $d ms in nodevold while the NFS server was dead"
done
vm_run vm_ctl -o json capacity local >/dev/null
wait "$publish_pid"
took=$(($(now_ms) - start))
vm_log "Publish of v2: exit $(cat /tmp/publish-v2.rc) after $took ms: $(cat /tmp/publish-v2.out)"
[[ $(cat /tmp/publish-v2.rc) != 0 ]] || vm_fail "Publish of v2 succeeded with the server dead"
grep -q "DEADLINE_EXCEEDED\|UNAVAILABLE" /tmp/publish-v2.out || vm_fail "Publish of v2 failed without DEADLINE_EXCEEDED/UNAVAILABLE"
grep -q "127.0.0.1" /tmp/publish-v2.out || vm_fail "the error does not name the server"
d=$(daemon_ms Publish "volume=v2.*outcome=")
vm_log "nodevold's own time for it: $d ms"
((d < timeout * 1000 + 1500)) || vm_fail "Publish of v2 took $d ms in nodevold with a $timeout s timeout"
# The client's wall time only has to show that nothing hung until
# nodevolctl's own 60 s deadline: under TCG on a loaded host, process
# start-up and the gRPC round trip alone have taken 19 s (24 s seen in CI).
((took < 45000)) || vm_fail "Publish of v2 took $took ms at the client with a $timeout s timeout: something hung"

vm_step "while the server stays dead, calls on it fail at once"
start=$(now_ms)
expect_code UNAVAILABLE vm_ctl publish --volume v2 --target "$t2"
took=$(($(now_ms) - start))
vm_log "second Publish: $took ms"
d=$(daemon_ms Publish "volume=v2.*outcome=UNAVAILABLE")
# "At once": well below the timeout (a loaded host has taken 2.5 s for any call).
((d < timeout * 1000 / 3)) || vm_fail "the second Publish took $d ms in nodevold; it should fail fast"
start=$(now_ms)
cap=$(vm_ctl -o json capacity) || vm_fail "GetCapacity failed with one server dead: $cap"
vm_log "GetCapacity: $(($(now_ms) - start)) ms; shared: $(vm_json_get "$(vm_ctl -o json capacity shared)" total_bytes) bytes (the last figures)"
[[ -z $(nfs_mount_at "$t2") ]] || vm_fail "a failed Publish left $t2 mounted"
start=$(now_ms)
expect_code DEADLINE_EXCEEDED vm_ctl --timeout 60 stats --target "$t1"
took=$(($(now_ms) - start))
vm_log "GetVolumeStats of a publication on the dead server: $took ms"
d=$(daemon_ms GetVolumeStats "outcome=DEADLINE_EXCEEDED")
((d < 11500)) || vm_fail "GetVolumeStats took $d ms in nodevold"
start=$(now_ms)
expect_code UNAVAILABLE vm_ctl stats --target "$t1"
took=$(($(now_ms) - start))
d=$(daemon_ms GetVolumeStats "outcome=UNAVAILABLE")
((d < 5000)) || vm_fail "the second GetVolumeStats took $d ms in nodevold; it should fail fast"

start=$(now_ms)
out=$(vm_ctl volume create v5 --pool shared --size 10Mi $(claim v5) 2>&1) && vm_fail "CreateVolume succeeded with the server dead"
took=$(($(now_ms) - start))
vm_log "CreateVolume of a new volume: $took ms: $out"
grep -q "UNAVAILABLE\|DEADLINE_EXCEEDED" <<<"$out" || vm_fail "CreateVolume failed otherwise: $out"
d=$(daemon_ms CreateVolume "volume=v5")
((d < timeout * 1000 + 1500)) || vm_fail "CreateVolume took $d ms in nodevold"

vm_step "nodevold restarts while the server is dead: it starts, and its publications are kept"
vm_nodevold_stop
start=$(now_ms)
vm_nodevold_start "$pool" --pool=name=local,backend=dir,path=/var/tmp/local-pool
took=$(($(now_ms) - start))
vm_log "start with the server dead: $took ms; drift: $(vm_ctl info | grep -c "v[0-9]") lines about volumes"
((took < 4 * timeout * 1000)) || vm_fail "nodevold took $took ms to start with the server dead"
[[ -n $(nfs_mount_at "$t1") && -n $(nfs_mount_at "$t4") ]] || vm_fail "a restart lost a publication's mount"
vm_ctl info | grep -q "127.0.0.1" && vm_log "info: $(vm_ctl info | grep "127.0.0.1" | head -2 | tr '\n' ' ')"
# With the NFS pool's figures unknown since the start, the node's other
# pools are still reported (the capacity monitor and WatchCapacity ask for
# every pool at once): a dead server must not hide the node's local pools.
cap=$(vm_ctl --timeout 60 -o json capacity) || vm_fail "GetCapacity of every pool failed after a start with the server dead: $cap"
grep -q '"local"' <<<"$cap" || vm_fail "the local pool is missing from GetCapacity: $cap"

vm_step "Unpublish of the volumes on the dead server completes"
start=$(now_ms)
vm_run vm_ctl --timeout 60 unpublish --target "$t1"
took=$(($(now_ms) - start))
vm_log "Unpublish of v1: $took ms (nodevold: $(daemon_ms Unpublish "pod-1/.*outcome=") ms)"
(($(daemon_ms Unpublish "pod-1/.*outcome=OK") < 3 * timeout * 1000 + 1000)) || vm_fail "Unpublish took too long in nodevold"
((took < (3 * timeout + 15) * 1000)) || vm_fail "Unpublish took $took ms"
[[ -z $(nfs_mount_at "$t1") ]] || vm_fail "$t1 is still mounted"
sa_left=$(nfs_mount_at "$sdir_a")
# The unmount may come a little later: when another call holds the staging
# mount's lock (one started before Unpublish and still waiting for the
# server: nodevold is ready before its first capacity sample ends),
# Unpublish drops its hold and leaves the unmount to that holder.
for ((i = 0; i < 3 * timeout && ${#sa_left} > 0; i++)); do sleep 1; sa_left=$(nfs_mount_at "$sdir_a"); done
[[ -z $sa_left ]] || vm_fail "v1's staging mount (nothing uses it) was not detached within $((3 * timeout)) s: $(grep -E "stays|forcing" "$VM_NODEVOLD_LOG")"
vm_ctl volume get v1 | grep -q v1 || vm_fail "v1 lost its record"
# nodevold's own calls stuck on the pool's staging mount keep it busy (or
# the unmount hangs flushing v1's writes): no process uses it, so it is
# detached, never forced (which would drop those writes).
grep -q "unmounting $sdir_a: .*detaching it" "$VM_NODEVOLD_LOG" || vm_fail "the staging mount was not detached: $(grep "$sdir_a" "$VM_NODEVOLD_LOG")"
! grep -q "forcing" "$VM_NODEVOLD_LOG" || vm_fail "nodevold forced an unmount: $(grep forcing "$VM_NODEVOLD_LOG")"
grep -E "detaching|detached lazily|staging mount .* stays" "$VM_NODEVOLD_LOG" | tail -3 | while read -r l; do vm_log "log: $l"; done || true
start=$(now_ms)
vm_run vm_ctl --timeout 60 unpublish --target "$t4"
took=$(($(now_ms) - start))
vm_log "Unpublish of v4: $took ms (nodevold: $(daemon_ms Unpublish "pod-4/.*outcome=") ms)"
(($(daemon_ms Unpublish "pod-4/.*outcome=OK") < 3 * timeout * 1000 + 1000)) || vm_fail "Unpublish took too long in nodevold"
((took < (3 * timeout + 15) * 1000)) || vm_fail "Unpublish took $took ms"
[[ -z $(nfs_mount_at "$t4") ]] || vm_fail "$t4 is still mounted"
[[ -n $(nfs_mount_at "$sdir_b") ]] || vm_fail "the staging mount a process uses was detached"
grep -q "$holder ([a-z_]*) use files below $sdir_b" "$VM_NODEVOLD_LOG" || vm_fail "the log does not name the process using $sdir_b"
vm_log "log: $(grep "use files below" "$VM_NODEVOLD_LOG" | tail -1)"

vm_step "the server is back: the writes made during the outage reach it, operations recover"
nfs_server_resume
# Its write may itself have waited for the server: let it finish (the
# process then becomes sleep), then end it; its close flushes what is
# still pending.
for _ in $(seq 240); do [[ $(cat "/proc/$holder/comm" 2>/dev/null) != sleep ]] || break; sleep 0.5; done
vm_log "the writer is now: $(cat "/proc/$holder/comm" 2>/dev/null || echo gone)"
kill "$holder"
wait "$holder" 2>/dev/null || true
cmp -s <(printf '%s' "$unflushed") "$NFS_EXPORT/ns-v4-v4/unflushed" ||
  vm_fail "writes made during the outage are lost: the server has $(stat -c %s "$NFS_EXPORT/ns-v4-v4/unflushed") of 262144 bytes"
vm_log "the server has all 262144 bytes written during the outage"
ok=0
for i in $(seq 60); do
  if vm_ctl publish --volume v2 --target "$t2" >/tmp/p.out 2>&1; then ok=1; break; fi
  sleep 1
done
((ok)) || vm_fail "Publish of v2 still fails a minute after the server came back: $(cat /tmp/p.out)"
vm_log "Publish of v2 works again after ${i} tries"
vm_run vm_ctl publish --volume v1 --target "$t1"
[[ $(cat "$t1/f") == "written before the outage" ]] || vm_fail "v1's data is gone"
echo "after" >"$t2/g"
[[ $(cat "$NFS_EXPORT/ns-v2-v2/g") == after ]] || vm_fail "the server lacks v2's new file"
cap=$(vm_ctl -o json capacity shared)
for _ in $(seq 30); do
  (($(vm_json_get "$cap" total_bytes) > 0)) && break
  sleep 1
  cap=$(vm_ctl -o json capacity shared)
done
(($(vm_json_get "$cap" total_bytes) == 32 * 1024 * 1024)) || vm_fail "capacity after recovery: $cap"

vm_step "the export is re-created on the server: stale handles are replaced at the next Stage"
exportfs -ua
umount -l "$NFS_EXPORT"
mount -t tmpfs -o size=32m tmpfs "$NFS_EXPORT"
mkdir -m 0777 "$NFS_EXPORT/ns-v1-v1" "$NFS_EXPORT/ns-v2-v2" "$NFS_EXPORT/ns-v4-v4"
echo "new export" >"$NFS_EXPORT/ns-v1-v1/f"
exportfs -ra
sleep 2
stale=$(cat "$t1/f" 2>&1 || true)
vm_log "the old publication now reads: $stale"
t3=$(vm_target pod-3 v1)
vm_run vm_ctl publish --volume v1 --target "$t3"
[[ $(cat "$t3/f") == "new export" ]] || vm_fail "a new publication after ESTALE shows: $(cat "$t3/f" 2>&1)"
grep -q "binding it again\|mounting it again" "$VM_NODEVOLD_LOG" || vm_fail "nodevold did not say it replaced a stale mount"

vm_step "a reboot with the server down and three publications to re-stage: the start does not wait; the binds come back with the server"
vm_nodevold_stop
nfs_server_stop
# What a reboot leaves: no mounts (detached here: the server cannot answer
# an unmount), the records.
for t in "$t1" "$t2" "$t3"; do umount -l "$t"; done
for m in $(nfs_mounts_below "$VM_STATE/nfs" | awk '{print $4}' | sort -r); do umount -l "$m"; done
[[ -z $(nfs_mounts_below "$VM_STATE/nfs") ]] || vm_fail "mounts left after the simulated reboot: $(nfs_mounts_below "$VM_STATE/nfs")"
from=$(wc -l <"$VM_NODEVOLD_LOG")
start=$(now_ms)
vm_nodevold_start "$pool" --pool=name=local,backend=dir,path=/var/tmp/local-pool
took=$(($(now_ms) - start))
info=$(vm_ctl info)
deferred=$(grep -c "bind mount is missing; re-creating it in the background" <<<"$info" || true)
vm_log "start: $took ms; binds left to the background: $deferred"
# Before issue 30 item 3 each re-stage waited for the dead server in turn
# (3 x 30 s with the default timeout: past systemd's start limit, a
# restart loop); then one waited. Now none does, nor the first capacity
# sample: nodevold is ready before any mount could time out. (The order of
# the log lines, not a time: a loaded host makes any start slow.)
first=$(tail -n +"$((from + 1))" "$VM_NODEVOLD_LOG" | grep -m1 -E "info ready:|did not answer within" || true)
[[ $first == *"info ready:"* ]] || vm_fail "nodevold waited for the dead server before it was ready: $first"
((deferred == 3)) || vm_fail "want 3 binds re-created in the background, info says: $info"
# The node serves meanwhile: the local pool works.
vm_run vm_ctl volume create lx --pool local --size 1Mi $(claim lx)
vm_run vm_ctl volume delete lx
nfs_server_resume
for _ in $(seq 120); do
  [[ -n $(nfs_mount_at "$t1") && -n $(nfs_mount_at "$t2") && -n $(nfs_mount_at "$t3") ]] && break
  sleep 0.5
done
for t in "$t1" "$t2" "$t3"; do
  [[ -n $(nfs_mount_at "$t") ]] || vm_fail "$t not bound again 60 s after the server came back: $(grep "$t" "$VM_NODEVOLD_LOG" | tail -3)"
done
[[ $(cat "$t1/f") == "new export" && $(cat "$t3/f") == "new export" ]] || vm_fail "the re-created binds of v1 do not show it"
vm_ctl info | grep -q "at $t1: bind mount was missing; re-created after the start" || vm_fail "the background re-creation is not reported: $(vm_ctl info)"
vm_log "binds of $t1, $t2 and $t3 re-created in the background once the server answered"

vm_step "clean up (v4's staging mount, kept for the process, goes with v4's next unpublish)"
for _ in $(seq 60); do vm_ctl publish --volume v4 --target "$t4" >/tmp/p.out 2>&1 && break; sleep 1; done
[[ -n $(nfs_mount_at "$t4") ]] || vm_fail "publish of v4 after the server came back: $(cat /tmp/p.out)"
for t in "$t1" "$t2" "$t3" "$t4"; do vm_run vm_ctl unpublish --target "$t"; done
for v in v1 v2 v4; do vm_run vm_ctl volume delete $v; done
nfs_expect_unmounted "NFS mounts left"
vm_nodevold_stop
vm_step "PASS"
