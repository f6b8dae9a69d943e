#!/bin/bash
# Runs inside a vm-run guest (tests/vm/CMakeLists.txt: vm_lvm_disks): which
# disks an LVM pool's volume group is built from (mountd/backend/lvm/disks.h)
# on real disks, without udevd (serials from sysfs, the kernel's events).
#   lvm_disks_test.sh     disks: pool1, pool2, pool-ext4 (256M each)
# pool-ext4 gets an ext4 filesystem first: it matches the rule pool* too and
# must be refused and left untouched. Part 1 runs the RealDisks tests of
# UNIT_TESTS (the unit test binary); part 2 the real nodevold (NODEVOLD,
# NODEVOLCTL) with an lvm pool built from disk rules.
source "$VM_LIB"

: "${UNIT_TESTS:?UNIT_TESTS must name the unit_tests binary (vm-run --env UNIT_TESTS=...)}"
export DM_DISABLE_UDEV=1  # for the lvm commands this script runs itself
export NODEVOL_REAL_DISKS=1 NODEVOL_REAL_VG=nvdisks
MiB=$((1024 * 1024))

# gtest FILTER: runs those RealDisks tests; none may fail or be skipped.
gtest() {
  local out rc=0
  printf '    $ unit_tests --gtest_filter=%s\n' "$1"
  out=$("$UNIT_TESTS" --gtest_filter="$1" 2>&1) || rc=$?
  grep -v '^\[-\{10\}\]\|^\[=\{10\}\]\|^$\|^Running main\|^Note: Google Test filter\|Global test environment' <<<"$out" |
    sed 's/^/    /'
  ((rc == 0)) || vm_fail "unit_tests --gtest_filter=$1 exited $rc"
  ! grep -q '^\[  SKIPPED \]' <<<"$out" || vm_fail "a RealDisks test was skipped: $(grep -A1 Skipped <<<"$out")"
  grep -q '^\[  PASSED  \]' <<<"$out" || vm_fail "no test ran for $1"
}
pvs_of() { lvm pvs --noheadings -o pv_name,vg_name 2>/dev/null | awk -v vg="$1" '$2 == vg {print $1}' | sort | xargs; }

pool1=$(vm_disk pool1) pool2=$(vm_disk pool2) ext4=$(vm_disk pool-ext4)
vm_log "pool1=$pool1 pool2=$pool2 pool-ext4=$ext4"

vm_step "ext4 on pool-ext4 (it matches pool* as well)"
vm_run mkfs.ext4 -q -F -E nodiscard "$ext4"
uuid=$(blkid -p -s UUID -o value "$ext4")
vm_log "UUID=$uuid"

vm_step "ListDisks finds the disks by serial with their sizes; ProbeSignature tells blank from ext4"
gtest 'RealDisks.ListDisks*:RealDisks.ProbeSignature*'

vm_step "EnsureVolumeGroup, match-serial=pool*: VG nvdisks from pool1 and pool2, pool-ext4 refused"
gtest 'RealDisks.EnsureVolumeGroupTakesBlankMatchesOnly'
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
NODEVOL_HOTPLUG_SERIAL=pool-hot gtest 'RealDisks.EnsureVolumeGroupExtendsWithTheNewDiskOnly'
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

vm_step "PASS"
