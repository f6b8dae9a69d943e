#!/bin/bash
# Runs inside a vm-run guest (tests/vm/CMakeLists.txt: vm_lvm_disks): which
# disks an LVM pool's volume group is built from (mountd/backend/lvm/disks.h)
# on real disks, without udevd (serials from sysfs, the kernel's events).
#   lvm_disks_test.sh     disks: pool1, pool2, pool-ext4 (256M each)
# pool-ext4 gets an ext4 filesystem first: it matches the rule pool* too and
# must be refused and left untouched. Part 1 runs the RealDisks tests of
# UNIT_TESTS (the unit test binary); part 2 the real nodevold (NODEVOLD,
# NODEVOLCTL) with an lvm pool built from disk rules, and disks hot-plugged
# into it (pool3, matching; other, not).
source "$VM_LIB"

: "${UNIT_TESTS:?UNIT_TESTS must name the unit_tests binary (vm-run --env UNIT_TESTS=...)}"
export DM_DISABLE_UDEV=1  # for the lvm commands this script runs itself
export NODEVOL_REAL_DISKS=1 NODEVOL_REAL_VG=nvdisks
MiB=$((1024 * 1024))

pvs_of() { lvm pvs --noheadings -o pv_name,vg_name 2>/dev/null | awk -v vg="$1" '$2 == vg {print $1}' | sort | xargs; }

pool1=$(vm_disk pool1) pool2=$(vm_disk pool2) ext4=$(vm_disk pool-ext4)
vm_log "pool1=$pool1 pool2=$pool2 pool-ext4=$ext4"

vm_step "ext4 on pool-ext4 (it matches pool* as well)"
vm_run mkfs.ext4 -q -F -E nodiscard "$ext4"
uuid=$(blkid -p -s UUID -o value "$ext4")
vm_log "UUID=$uuid"

vm_step "pool-part: an MBR, partition 1 type 0xbf (ZFS), 2 type 0x8e (LVM), both blank (they match pool* too)"
part=$(vm_disk pool-part)
le32() { local i; for i in 0 8 16 24; do printf "\\x$(printf %02x $((($1 >> i) & 255)))"; done; }
mbr_entry() { printf "\\x00\\x00\\x00\\x00\\x$1\\x00\\x00\\x00"; le32 "$2"; le32 "$3"; }  # TYPE START SECTORS
{ mbr_entry bf 2048 131072; mbr_entry 8e 133120 131072; } | dd of="$part" bs=1 seek=446 conv=notrunc status=none
printf '\x55\xaa' | dd of="$part" bs=1 seek=510 conv=notrunc status=none
vm_run blockdev --rereadpt "$part"
for _ in $(seq 50); do [[ -e ${part}2 ]] && break; sleep 0.1; done
vm_log "$(blkid -p -o export "${part}1" | grep PART_ENTRY_TYPE) $(blkid -p -o export "${part}2" | grep PART_ENTRY_TYPE)"
part_sums=$(md5sum "${part}1" "${part}2" | awk '{print $1}' | xargs)

vm_step "ListDisks finds the disks by serial with their sizes; ProbeSignature tells blank from ext4"
vm_gtest 'RealDisks.ListDisks*:RealDisks.ProbeSignature*'

vm_step "partitions: taken only when named exactly, and only of a Linux type"
vm_gtest 'RealDisks.PartitionsOnlyWhenNamedAndOfALinuxType'

vm_step "a signature written after the probe: lvm is told to answer no, the ext4 stays"
vm_gtest 'RealDisks.SignatureWrittenAfterTheProbeIsNotWiped'
[[ $(blkid -p -s UUID -o value "$ext4") == "$uuid" ]] || vm_fail "pool-ext4 changed: $(blkid -p "$ext4")"

vm_step "EnsureVolumeGroup, match-serial=pool*: VG nvdisks from pool1 and pool2, pool-ext4 and pool-part refused"
vm_gtest 'RealDisks.EnsureVolumeGroupTakesBlankMatchesOnly'
vm_log "vgs: $(lvm vgs --noheadings -o vg_name,pv_count,vg_size nvdisks)"
got=$(pvs_of nvdisks)
want=$(printf '%s\n' "$pool1" "$pool2" | sort | xargs)
[[ $got == "$want" ]] || vm_fail "PVs of nvdisks: '$got', want '$want'"
[[ $(blkid -p -s TYPE -o value "$ext4") == ext4 && $(blkid -p -s UUID -o value "$ext4") == "$uuid" ]] ||
  vm_fail "the refused disk changed: $(blkid -p "$ext4")"
! lvm pvs "$ext4" >/dev/null 2>&1 || vm_fail "$ext4 became a PV"
vm_log "pool-ext4 still ext4, UUID $uuid, not a PV"

vm_step "DiskMonitor sees a disk hot-plugged meanwhile (serial pool-hot, 128M)"
ready=/run/disks-monitor-ready
rm -f "$ready"
NODEVOL_HOTPLUG_SERIAL=pool-hot NODEVOL_READY_FILE=$ready \
  "$UNIT_TESTS" --gtest_filter='RealDisks.MonitorSeesAHotPluggedDisk' >/run/monitor-test.log 2>&1 &
mon=$!
for _ in $(seq 300); do [[ -e $ready ]] || ! kill -0 $mon 2>/dev/null && break; sleep 0.1; done
[[ -e $ready ]] || { cat /run/monitor-test.log; vm_fail "the monitor test did not get ready"; }
t0=$(cut -d' ' -f1 /proc/uptime)
hot=$(vm_hotplug_disk pool-hot 128M)
rc=0
wait $mon || rc=$?
vm_log "hot-plugged $hot; monitor test ended $(awk -v t0="$t0" '{printf "%.1f", $1 - t0}' /proc/uptime) s after the request"
sed -n '/^seen\|Failure\|FAILED\|SKIPPED\|Expected\|Which is\|actual/p' /run/monitor-test.log | sed 's/^/    /'
((rc == 0)) || { cat /run/monitor-test.log; vm_fail "RealDisks.MonitorSeesAHotPluggedDisk failed"; }
grep -q '^\[  PASSED  \] 1 test' /run/monitor-test.log || vm_fail "the monitor test did not run: $(cat /run/monitor-test.log)"

vm_step "EnsureVolumeGroup again: vgextend with the new disk only"
NODEVOL_HOTPLUG_SERIAL=pool-hot vm_gtest 'RealDisks.EnsureVolumeGroupExtendsWithTheNewDiskOnly'
got=$(pvs_of nvdisks)
want=$(printf '%s\n' "$pool1" "$pool2" "$hot" | sort | xargs)
[[ $got == "$want" ]] || vm_fail "PVs of nvdisks after the hot-plug: '$got', want '$want'"
vm_log "vgs: $(lvm vgs --noheadings -o vg_name,pv_count,vg_size nvdisks)"

vm_step "clean up: the disks blank again"
vm_run lvm vgremove -y -q nvdisks
vm_run lvm pvremove -y -q "$pool1" "$pool2" "$hot"
vm_unplug_disk pool-hot
for d in "$pool1" "$pool2"; do
  [[ -z $(blkid -p -o value -s TYPE "$d" || true) ]] || vm_fail "$d is not blank after pvremove: $(blkid -p "$d")"
done

# ---- part 2: the real nodevold, an lvm pool built from disk rules ----
: "${NODEVOLD:?}" "${NODEVOLCTL:?}"
log_has() { grep -qF -- "$1" "$VM_NODEVOLD_LOG"; }
wait_for() {  # SECONDS DESCRIPTION COMMAND...: polls every 0.2 s
  local secs=$1 what=$2 i
  shift 2
  for ((i = 0; i < secs * 5; i++)); do "$@" && return 0; sleep 0.2; done
  vm_fail "not within ${secs} s: $what"
}
total_of() { vm_json_get "$(vm_ctl -o json capacity fast)" total_bytes; }

vm_step "nodevold, pool fast: backend=lvm,vg=nv,match-serial=pool*"
vm_nodevold_start '--pool=name=fast,backend=lvm,vg=nv,type=thick,match-serial=pool*'
got=$(pvs_of nv)
want=$(printf '%s\n' "$pool1" "$pool2" | sort | xargs)
[[ $got == "$want" ]] || vm_fail "PVs of nv: '$got', want '$want'"
vm_log "vgs: $(lvm vgs --noheadings -o vg_name,pv_count,vg_size nv)"
[[ $(blkid -p -s UUID -o value "$ext4") == "$uuid" ]] || vm_fail "nodevold touched pool-ext4: $(blkid -p "$ext4")"
[[ $(md5sum "${part}1" "${part}2" | awk '{print $1}' | xargs) == "$part_sums" ]] ||
  vm_fail "nodevold wrote to a partition of pool-part"
! lvm pvs "$part" "${part}1" "${part}2" >/dev/null 2>&1 || vm_fail "pool-part or a partition became a PV"
log_has "${part}1 (serial pool-part, 64.0MiB, partition): a partition is used only when devices= names it exactly" ||
  vm_fail "the log does not say why ${part}1 was not taken"
log_has "$ext4 (serial pool-ext4, 256.0MiB): matched by match-serial=pool*, but it is not blank (ext4 filesystem)" ||
  vm_fail "the log does not say why pool-ext4 was refused"
vm_log "log: $(grep -F "serial pool-ext4" "$VM_NODEVOLD_LOG" | head -1 | cut -c1-200)"
total0=$(total_of)
vm_log "capacity total_bytes=$total0"
((total0 > 400 * MiB)) || vm_fail "capacity of the two-disk pool: $total0 bytes"

vm_step "hot-plug pool3 (matches): nodevold adds it to nv, capacity grows"
t0=$(cut -d' ' -f1 /proc/uptime)
pool3=$(vm_hotplug_disk pool3 128M)
want=$(printf '%s\n' "$pool1" "$pool2" "$pool3" | sort | xargs)
pvs_are() { [[ $(pvs_of nv) == "$want" ]]; }
wait_for 60 "$pool3 (pool3) in VG nv (PVs: $(pvs_of nv))" pvs_are
vm_log "in VG nv $(awk -v t0="$t0" '{printf "%.1f", $1 - t0}' /proc/uptime) s after the hot-plug request"
grows() { (($(total_of) > total0)); }
wait_for 30 "capacity above $total0 bytes" grows
vm_log "capacity total_bytes=$(total_of) (was $total0)"
log_has "$pool3 (serial pool3, 128.0MiB): blank, matched by match-serial=pool*; taken for VG nv" ||
  vm_fail "the log does not say why pool3 was taken"

vm_step "hot-plug other (matches nothing): ignored"
other=$(vm_hotplug_disk other 128M)
noticed() { log_has "$other (serial other, 128.0MiB): not selected"; }
wait_for 60 "nodevold noticing $other" noticed
vm_log "log: $(grep -F "$other (serial other" "$VM_NODEVOLD_LOG" | tail -1 | cut -c1-200)"
[[ $(pvs_of nv) == "$want" ]] || vm_fail "PVs of nv changed: $(pvs_of nv)"
[[ -z $(blkid -p -o value -s TYPE "$other" || true) ]] || vm_fail "$other was written: $(blkid -p "$other")"

vm_step "restart: nothing to add, nothing run but reports"
vm_nodevold_stop
lines=$(wc -l <"$VM_NODEVOLD_LOG")
vm_nodevold_start '--pool=name=fast,backend=lvm,vg=nv,type=thick,match-serial=pool*'
grep -q "$pool3 (serial pool3, 128.0MiB): already a physical volume of VG nv" <(tail -n +$((lines + 1)) "$VM_NODEVOLD_LOG") ||
  vm_fail "after the restart the log does not show pool3 as a member"
! grep -q "VG nv: adding\|VG nv: creating" <(tail -n +$((lines + 1)) "$VM_NODEVOLD_LOG") || vm_fail "the restart changed VG nv"
[[ $(pvs_of nv) == "$want" ]] || vm_fail "PVs of nv changed across the restart: $(pvs_of nv)"
vm_nodevold_stop

vm_step "a rule that pins no disk (match-size=) never grows the VG: not at start, not on hot-plug"
# issue 27 item 1: a cloud or SAN volume attached for another tenant is
# blank until its owner writes to it; a size rule would take it.
vm_nodevold_start '--pool=name=fast,backend=lvm,vg=nv,type=thick,match-size=100M-200M'
[[ $(pvs_of nv) == "$want" ]] || vm_fail "match-size= added a disk at start: $(pvs_of nv)"
log_has "$other (serial other, 128.0MiB): matched by match-size=100M-200M, but VG nv exists and only disks pinned" ||
  vm_fail "the log does not say why $other was not added"
sized=$(vm_hotplug_disk sized 160M)
noticed_sized() { log_has "$sized (serial sized, 160.0MiB): matched by match-size=100M-200M, but VG nv exists"; }
wait_for 60 "nodevold refusing the hot-plugged $sized" noticed_sized
[[ $(pvs_of nv) == "$want" ]] || vm_fail "match-size= added a hot-plugged disk: $(pvs_of nv)"
[[ -z $(blkid -p -o value -s TYPE "$sized" || true) ]] || vm_fail "$sized was written: $(blkid -p "$sized")"
vm_log "log: $(grep -F "$sized (serial sized" "$VM_NODEVOLD_LOG" | tail -1 | cut -c1-220)"
vm_nodevold_stop

vm_step "a VG of the pool's name the operator made (no nodevol.io/managed tag) is never extended"
# issue 27 item 7.
vm_run lvm vgcreate -qq opvg "$other"
vm_nodevold_start '--pool=name=op,backend=lvm,vg=opvg,type=thick,match-serial=sized'
[[ $(pvs_of opvg) == "$other" ]] || vm_fail "nodevold extended the operator's VG opvg: $(pvs_of opvg)"
log_has "$sized (serial sized, 160.0MiB): matched by match-serial=sized, but VG opvg was not made by nodevold" ||
  vm_fail "the log does not say why opvg was not extended"
vm_nodevold_stop

vm_step "PASS"
