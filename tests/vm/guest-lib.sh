# Helpers for test programs running inside a vm-run guest:
#   source "$VM_LIB"
# Everything here runs as root in the guest. Functions fail the test (exit 1,
# after printing why and the nodevold log, if any) rather than return errors.

set -euo pipefail

vm_t0=$(cut -d' ' -f1 /proc/uptime)

# Prints a step with the guest's uptime, to follow a slow emulated run.
vm_step() { printf '=== [%6.1fs] %s\n' "$(cut -d' ' -f1 /proc/uptime)" "$*"; }
vm_log() { printf '    %s\n' "$*"; }

vm_fail() {
  echo "FAIL: $*"
  if [[ -n ${VM_NODEVOLD_LOG:-} && -s ${VM_NODEVOLD_LOG} ]]; then
    echo "----- nodevold log (last 40 lines) -----"
    tail -n 40 "$VM_NODEVOLD_LOG"
  fi
  exit 1
}

# Runs a command, showing it; fails the test when it fails.
vm_run() {
  printf '    $ %s\n' "$*"
  "$@" || vm_fail "command failed (exit $?): $*"
}

# vm_disk SERIAL: the /dev path of the scratch disk vm-run attached with
# --disk SERIAL:SIZE. Disks are found by serial: /dev/vdX order is not stable.
vm_disk() {
  local serial=$1 f
  for _ in $(seq 100); do
    for f in /sys/block/*/serial; do
      if [[ -r $f && $(<"$f") == "$serial" ]]; then
        f=${f%/serial}
        echo "/dev/${f##*/}"
        return 0
      fi
    done
    sleep 0.1
  done
  vm_fail "no disk with serial $serial (have: $(grep -H . /sys/block/*/serial 2>/dev/null | tr '\n' ' '))"
}

# vm_disk_bytes SERIAL: size of that disk in bytes.
vm_disk_bytes() {
  local dev
  dev=$(vm_disk "$1")
  echo $(($(<"/sys/block/${dev#/dev/}/size") * 512))
}

# vm_mkfs_mount FS SERIAL DIR [MOUNT OPTIONS]: makes FS (ext4 or xfs) on the
# disk and mounts it on DIR. ext4 gets the quota and project features so
# prjquota works.
vm_mkfs_mount() {
  local fs=$1 serial=$2 dir=$3 opts=${4:-} dev
  dev=$(vm_disk "$serial")
  case $fs in
    ext4) vm_run mkfs.ext4 -q -F -O quota,project -E nodiscard,lazy_itable_init=1 "$dev" ;;
    xfs) vm_run mkfs.xfs -q -f -K "$dev" ;;
    *) vm_fail "vm_mkfs_mount: unknown filesystem $fs" ;;
  esac
  mkdir -p "$dir"
  vm_run mount -t "$fs" ${opts:+-o "$opts"} "$dev" "$dir"
}

# vm_nodevold_start [FLAG...]: starts the nodevold named by $NODEVOLD in a
# sandbox (socket, state dir, pods root below $VM_SANDBOX, default
# /run/nodevol-vm), like tests/integration's DaemonFixture, with the given
# extra flags (at least one --pool), and waits until it answers.
# Sets VM_SOCKET, VM_PODS, VM_STATE, VM_NODEVOLD_PID, VM_NODEVOLD_LOG.
# vm_gtest FILTER: runs those tests of the unit_tests binary ($UNIT_TESTS,
# vm-run --env UNIT_TESTS=...) that only run in the guest; none may fail or
# be skipped, and at least one must run.
vm_gtest() {
  local out rc=0
  : "${UNIT_TESTS:?UNIT_TESTS must name the unit_tests binary (vm-run --env UNIT_TESTS=...)}"
  printf '    $ unit_tests --gtest_filter=%s\n' "$1"
  out=$("$UNIT_TESTS" --gtest_filter="$1" 2>&1) || rc=$?
  grep -v '^\[-\{10\}\]\|^\[=\{10\}\]\|^$\|^Running main\|^Note: Google Test filter\|Global test environment' <<<"$out" |
    sed 's/^/    /'
  ((rc == 0)) || vm_fail "unit_tests --gtest_filter=$1 exited $rc"
  ! grep -q '^\[  SKIPPED \]' <<<"$out" || vm_fail "a test was skipped: $(grep -A1 Skipped <<<"$out")"
  grep -q '^\[  PASSED  \]' <<<"$out" || vm_fail "no test ran for $1"
}

vm_nodevold_start() {
  : "${NODEVOLD:?NODEVOLD must name the nodevold binary (vm-run --env NODEVOLD=...)}"
  VM_SANDBOX=${VM_SANDBOX:-/run/nodevol-vm}
  VM_SOCKET=$VM_SANDBOX/nodevold.sock
  VM_PODS=$VM_SANDBOX/pods
  VM_STATE=$VM_SANDBOX/state
  VM_NODEVOLD_LOG=${VM_OUT:-$VM_SANDBOX}/nodevold.log
  mkdir -p "$VM_SANDBOX" "$VM_PODS" "$VM_STATE"
  : >"$VM_SANDBOX/nodevold.conf"
  "$NODEVOLD" --config="$VM_SANDBOX/nodevold.conf" --socket="$VM_SOCKET" --state-dir="$VM_STATE" \
    --pods-root="$VM_PODS" --metrics-address=off --log-target=stderr --log-level=debug \
    "$@" </dev/null >>"$VM_NODEVOLD_LOG" 2>&1 &
  VM_NODEVOLD_PID=$!
  for _ in $(seq 300); do
    kill -0 "$VM_NODEVOLD_PID" 2>/dev/null || { wait "$VM_NODEVOLD_PID" || true; vm_fail "nodevold exited during start"; }
    [[ -S $VM_SOCKET ]] && vm_ctl info >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  vm_fail "nodevold did not answer within 30 s"
}

# vm_nodevold_stop: SIGTERM, wait; fails unless it exits 0.
vm_nodevold_stop() {
  kill -TERM "$VM_NODEVOLD_PID"
  local rc=0
  wait "$VM_NODEVOLD_PID" || rc=$?
  [[ $rc == 0 ]] || vm_fail "nodevold exited $rc on SIGTERM"
}

# expect_code CODE COMMAND...: the command must fail and say CODE (a gRPC
# code name as nodevolctl prints it, e.g. INVALID_ARGUMENT).
expect_code() {
  local want=$1 out
  shift
  if out=$("$@" 2>&1); then vm_fail "succeeded, expected $want: $*"; fi
  grep -q "$want" <<<"$out" || vm_fail "expected $want from '$*', got: $out"
  vm_log "$want: $(tail -1 <<<"$out")"
}

# vm_ctl ARGS...: the nodevolctl named by $NODEVOLCTL on the sandbox socket.
vm_ctl() {
  : "${NODEVOLCTL:?NODEVOLCTL must name the nodevolctl binary (vm-run --env NODEVOLCTL=...)}"
  # A deadline of 60 s (nodevolctl's own is 30), scaled as every wait of the suite is
  # (NODEVOL_TIMEOUT_PERCENT, which vm-run passes in): a thin LV's create
  # and mkfs took over 30 s under tcg on a busy 2-core machine.
  local deadline=()
  [[ " $* " == *" --timeout"* ]] || deadline=(--timeout "$((60 * ${NODEVOL_TIMEOUT_PERCENT:-100} / 100))")
  "$NODEVOLCTL" --socket "${VM_SOCKET:-/run/nodevol/nodevold.sock}" "${deadline[@]}" "$@"
}

# vm_target POD_UID NAME: makes and prints a pod volume directory
# <pods>/<uid>/volumes/nodevol.io~volume/<name>, as kubelet would.
vm_target() {
  local t=${VM_PODS:?}/$1/volumes/nodevol.io~volume/$2
  mkdir -p "$t"
  echo "$t"
}

# vm_json_get JSON KEY: the first value of "KEY" in JSON (numbers and
# strings; enough for nodevolctl -o json without a JSON tool).
vm_json_get() {
  grep -o "\"$2\" *: *\(\"[^\"]*\"\|[0-9.]*\)" <<<"$1" | head -1 | sed 's/^[^:]*: *//; s/^"//; s/"$//'
}

# vm_hotplug_disk SERIAL SIZE: asks vm-run (on the host) to create a sparse
# disk of SIZE and hot-plug it into this running guest as a virtio disk with
# that serial (qemu drive_add + device_add); prints its /dev path once the
# kernel sees it. vm_unplug_disk SERIAL removes it again (device_del).
vm_hotplug_request() {  # op serial [size]
  local req=/vm/hotplug/$2-$1
  rm -f "$req.done"  # a disk may be added again after its removal
  echo "$1 $2 ${3:-}" >"$req.tmp" && mv "$req.tmp" "$req.req"
  for _ in $(seq 100); do [[ -e $req.done ]] && return 0; sleep 0.1; done
  vm_fail "the host did not carry out hot-plug request '$1 $2'"
}
vm_hotplug_disk() {
  vm_hotplug_request add "$1" "$2"
  vm_disk "$1"
}
vm_unplug_disk() {
  local dev
  dev=$(vm_disk "$1")
  vm_hotplug_request del "$1"
  for _ in $(seq 100); do [[ -e $dev ]] || return 0; sleep 0.1; done
  vm_fail "$dev ($1) still present after device_del"
}
