#!/bin/bash
# Runs bench/lvm_bench (LVM volumes through nodevold vs. the same commands
# by hand) inside a vm-run guest, and writes its Markdown report.
#
#   tests/vm/lvm_bench_run.sh [--build DIR] [--out FILE] [--timeout S] [--mem MIB]
#                             [-- LVM_BENCH_OPTIONS...]
#
# --build: the build tree with bench/lvm_bench and mountd/nodevold (default
# build/); --out: where the report goes (default: stdout, after the
# progress lines on stderr). The guest gets a 6 GiB scratch disk for the
# volume group (serial lvm1, sparse) and a 1 GiB one (serial state) with
# ext4 for nodevold's state, staging and pods directories, as a node keeps
# /var/lib/nodevol on a disk. `-- --snapshots` measures snapshot and
# restore instead (bench/lvm_bench.cc). Not a test: ctest never runs it
# (docs/benchmarks.md, "lvm_bench").
#
# Inside the guest the same script runs with --guest.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

if [[ ${1:-} == --guest ]]; then
  shift
  source "$VM_LIB"
  : "${LVM_BENCH:?}" "${NODEVOLD:?}"
  vm_step "ext4 on the state disk, mounted on /var/lib/nodevol-bench"
  state=$(vm_disk state)
  vm_run mkfs.ext4 -q -F -E nodiscard "$state"
  mkdir -p /var/lib/nodevol-bench
  vm_run mount -t ext4 "$state" /var/lib/nodevol-bench
  vm_step "lvm_bench on $(vm_disk lvm1) ($(($(vm_disk_bytes lvm1) >> 20)) MiB)"
  rc=0
  "$LVM_BENCH" --devices="$(vm_disk lvm1)" --work-dir=/var/lib/nodevol-bench --nodevold="$NODEVOLD" "$@" \
    >"$VM_OUT/lvm_bench.md" || rc=$?
  vm_step "lvm_bench exited $rc"
  exit "$rc"
fi

build=$repo/build out="" timeout=3600 mem=1024 bench_args=()
while (($#)); do
  case $1 in
    --build) build=$(cd "${2:?}" && pwd); shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --timeout) timeout=${2:?}; shift 2 ;;
    --mem) mem=${2:?}; shift 2 ;;
    --) shift; bench_args=("$@"); break ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "lvm_bench_run.sh: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
done
bench=$build/bench/lvm_bench nodevold=$build/mountd/nodevold
for f in "$bench" "$nodevold"; do
  [[ -x $f ]] || { echo "lvm_bench_run.sh: $f is missing; build it: cmake --build $build --target lvm_bench nodevold" >&2; exit 2; }
done

check=$("$here/vm-run" --check 2>&1) || { echo "$check" >&2; exit 77; }
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
others() { pgrep -c -f '^[^ ]*qemu-system' || true; }
host="$cpu, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) and $(others) other qemu guest(s) at start; ${check#vm-run: }"
commit=$(git -C "$repo" log -1 --format='%h (%cs) %s' 2>/dev/null || echo unknown)
[[ -n $(git -C "$repo" status --porcelain --untracked-files=no -- mountd proto 2>/dev/null) ]] && commit+=", with uncommitted changes in mountd/ or proto/"
commit+="; nodevold built $(date -r "$nodevold" '+%F %T')"

work=$(mktemp -d "${TMPDIR:-/tmp}/lvm-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
rc=0
"$here/vm-run" --work-dir "$work/vm" --keep --cache-dir "$build/vm-cache" --mem "$mem" --timeout "$timeout" \
  --disk lvm1:6G --disk state:1G \
  --env LVM_BENCH="$bench" --env NODEVOLD="$nodevold" --env LVM_BENCH_HOST="$host" --env LVM_BENCH_COMMIT="$commit" \
  -- "$here/lvm_bench_run.sh" --guest "${bench_args[@]}" >&2 || rc=$?
report=$work/vm/share/out/lvm_bench.md
if [[ -s $report ]]; then
  printf '\nHost at the end: load average %s, %s other qemu guest(s) running.\n' \
    "$(cut -d' ' -f1-3 /proc/loadavg)" "$(others)" >>"$report"
  if [[ -n $out ]]; then cp "$report" "$out"; echo "lvm_bench_run.sh: report in $out" >&2; else cat "$report"; fi
fi
exit "$rc"
