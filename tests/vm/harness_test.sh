#!/usr/bin/env bash
# Tests vm-run itself (ctest: vm_harness). On the host:
#   harness_test.sh [vm-run options...]
# boots one guest that checks what every VM test relies on (scratch disks by
# serial and size, overlay root, own /tmp, no /.dockerenv, arguments and
# environment passed intact, writes never reaching the host) and exits 7,
# which must come back as vm-run's status; then boots one that never ends,
# which the time limit must kill (status 124) on time.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [[ ${1:-} == --guest ]]; then
  source "$VM_LIB"
  marker=$2
  vm_step "scratch disks by serial"
  a=$(vm_disk alpha) b=$(vm_disk beta-2)
  [[ $a != "$b" ]] || vm_fail "alpha and beta-2 are the same device $a"
  (($(vm_disk_bytes alpha) == 64 << 20)) || vm_fail "alpha is $(vm_disk_bytes alpha) bytes"
  (($(vm_disk_bytes beta-2) == 96 << 20)) || vm_fail "beta-2 is $(vm_disk_bytes beta-2) bytes"
  vm_log "alpha=$a beta-2=$b"
  vm_step "disk hot-plug and unplug"
  h=$(vm_hotplug_disk hot-1 32M)
  (($(vm_disk_bytes hot-1) == 32 << 20)) || vm_fail "hot-1 is $(vm_disk_bytes hot-1) bytes"
  vm_log "hot-1=$h"
  vm_unplug_disk hot-1
  vm_log "hot-1 unplugged"
  vm_step "root, /tmp, traps"
  [[ $(findmnt -n -o FSTYPE /) == overlay ]] || vm_fail "/ is $(findmnt -n -o FSTYPE /)"
  [[ $(findmnt -n -o FSTYPE /tmp) == tmpfs ]] || vm_fail "/tmp is not the guest's own tmpfs"
  [[ ! -e /.dockerenv ]] || vm_fail "/.dockerenv is visible"
  vm_step "arguments and environment"
  [[ $3 == "two words" && $4 == '$HOME;`x`' ]] || vm_fail "arguments mangled: [$3] [$4]"
  [[ $VM_T == "a b 'c'" ]] || vm_fail "VM_T mangled: [$VM_T]"
  vm_step "writes stay in the guest"
  echo guest >"$marker" || vm_fail "cannot write $marker through the overlay"
  echo "guest checks passed"
  exit 7
fi

marker=$PWD/vm-harness-marker.$$
rm -f "$marker"
rc=0
out=$("$here/vm-run" "$@" --quiet --timeout 300 --disk alpha:64M --disk beta-2:96M --env "VM_T=a b 'c'" \
  -- "$here/harness_test.sh" --guest "$marker" "two words" '$HOME;`x`' 2>&1) || rc=$?
echo "$out"
((rc != 77)) || exit 77
((rc == 7)) || { echo "FAIL: vm-run returned $rc, the guest exited 7"; exit 1; }
grep -q "guest checks passed" <<<"$out" || { echo "FAIL: guest output missing"; exit 1; }
[[ ! -e $marker ]] || { rm -f "$marker"; echo "FAIL: a write in the guest reached the host"; exit 1; }

echo "=== time limit: a guest that never ends is killed"
start=$SECONDS
rc=0
out=$("$here/vm-run" "$@" --quiet --timeout 20 -- sleep 100000 2>&1) || rc=$?
echo "$out" | grep '^vm-run' || true
elapsed=$((SECONDS - start))
((rc == 124)) || { echo "FAIL: vm-run returned $rc after the time limit, want 124"; exit 1; }
((elapsed < 40)) || { echo "FAIL: the 20 s limit took ${elapsed}s"; exit 1; }
echo "killed after ${elapsed}s"
echo "PASS"
