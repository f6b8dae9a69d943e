#!/bin/bash
# Runs bench/dir_snapshot_bench (a dir pool's snapshot and restore through
# nodevold vs. cp -a --reflink=auto by hand) inside a vm-run guest, on a
# fresh filesystem of the kind asked for, and prints its Markdown report.
#
#   tests/vm/dir_snapshot_bench_run.sh [--build DIR] [--fs xfs|ext4] [-- BENCH_OPTIONS...]
#
# xfs is made with mkfs.xfs's defaults (reflink=1 on Debian 12), so copies
# share blocks; ext4 has no reflink and copies bytes. The host's own
# filesystem is measured by running the bench there directly. Not a test:
# ctest never runs it (docs/benchmarks.md, "dir_snapshot_bench").
#
# Inside the guest the same script runs with --guest.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

if [[ ${1:-} == --guest ]]; then
  shift
  source "$VM_LIB"
  : "${DIR_SNAPSHOT_BENCH:?}" "${NODEVOLD:?}" "${BENCH_FS:?}"
  vm_step "$BENCH_FS on disk 'pool', mounted on /mnt/pool"
  vm_mkfs_mount "$BENCH_FS" pool /mnt/pool
  [[ $BENCH_FS == xfs ]] && vm_log "$(xfs_info /mnt/pool | grep -o 'reflink=[01]')"
  rc=0
  "$DIR_SNAPSHOT_BENCH" --work-dir=/mnt/pool --nodevold="$NODEVOLD" "$@" >"$VM_OUT/dir_snapshot_bench.md" || rc=$?
  vm_step "dir_snapshot_bench exited $rc"
  exit "$rc"
fi

build=$repo/build fs=xfs bench_args=()
while (($#)); do
  case $1 in
    --build) build=$(cd "${2:?}" && pwd); shift 2 ;;
    --fs) fs=${2:?}; shift 2 ;;
    --) shift; bench_args=("$@"); break ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "dir_snapshot_bench_run.sh: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
done
bench=$build/bench/dir_snapshot_bench nodevold=$build/mountd/nodevold
for f in "$bench" "$nodevold"; do
  [[ -x $f ]] || { echo "dir_snapshot_bench_run.sh: $f is missing; build it" >&2; exit 2; }
done
check=$("$here/vm-run" --check 2>&1) || { echo "$check" >&2; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/dir-snapshot-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
rc=0
"$here/vm-run" --work-dir "$work/vm" --keep --cache-dir "$build/vm-cache" --mem 1024 --timeout 3600 \
  --disk pool:4G --env DIR_SNAPSHOT_BENCH="$bench" --env NODEVOLD="$nodevold" --env BENCH_FS="$fs" \
  -- "$here/dir_snapshot_bench_run.sh" --guest "${bench_args[@]}" >&2 || rc=$?
report=$work/vm/share/out/dir_snapshot_bench.md
[[ -s $report ]] && { echo "${check#vm-run: }"; echo; cat "$report"; }
exit "$rc"
