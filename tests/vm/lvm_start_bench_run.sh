#!/bin/bash
# Measures how soon nodevold answers after a start on a node with many LVM
# volumes (issue 18: 1000 LVs, first answer within 2 s under TCG), and
# what it runs meanwhile. Not a test: ctest never runs it
# (docs/benchmarks.md, "lvm_start_bench").
#
#   tests/vm/lvm_start_bench_run.sh [--build DIR] [--lvs N] [--starts K]
#
# In a vm-run guest: a VG on a scratch disk gets N thick LVs of one extent
# each, tagged as volumes of pool "thick", written in one vgcfgrestore (N
# lvcreates would take minutes under TCG) and activated with one vgchange.
# nodevold's first start adopts them (records made); then it is started K
# more times, each timed from exec to the first answer of a GetInfo, with
# the lvm processes it ran before answering counted (strace) on the last.
# Inside the guest the same script runs with --guest.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

if [[ ${1:-} == --guest ]]; then
  lvs=$2 starts=$3
  source "$VM_LIB"
  # From the guest's own memory, as a node runs them from its disk: read
  # over 9p page by page as they run, the binaries' start-up would stall
  # the one emulated CPU for everything else (the lvm command included).
  cp "$NODEVOLD" /tmp/nodevold && cp "$NODEVOLCTL" /tmp/nodevolctl
  NODEVOLD=/tmp/nodevold NODEVOLCTL=/tmp/nodevolctl
  export DM_DISABLE_UDEV=1 LC_ALL=C
  disk=$(vm_disk lvm1)
  vm_step "VG nv on $disk with $lvs LVs of one extent, by vgcfgrestore"
  vm_run lvm vgcreate -qq -s 4m nv "$disk"
  lvm vgcfgbackup -q -f /tmp/nv.vg nv
  {
    sed '$d' /tmp/nv.vg  # all but the VG's closing brace
    printf '\nlogical_volumes {\n'
    for ((i = 0; i < lvs; i++)); do
      id=$(printf '%032d' "$i")
      printf 'nv-vol%d {\nid = "%s-%s-%s-%s-%s-%s-%s"\nstatus = ["READ", "WRITE", "VISIBLE"]\nflags = []\n' \
        "$i" "${id:0:6}" "${id:6:4}" "${id:10:4}" "${id:14:4}" "${id:18:4}" "${id:22:4}" "${id:26:6}"
      printf 'tags = ["nodevol.io/managed", "nodevol.io/volume=vol%d", "nodevol.io/pool=thick"]\n' "$i"
      printf 'creation_time = 1700000000\ncreation_host = \"bench\"\nsegment_count = 1\nsegment1 {\nstart_extent = 0\nextent_count = 1\n'
      printf 'type = "striped"\nstripe_count = 1\nstripes = ["pv0", %d]\n}\n}\n' "$i"
    done
    printf '}\n}\n'
  } >/tmp/nv-many.vg
  t0=$EPOCHREALTIME
  vm_run lvm vgcfgrestore -q -f /tmp/nv-many.vg nv
  vm_run lvm vgchange -q -ay nv
  vm_log "restored and activated in $(((${EPOCHREALTIME/./} - ${t0/./}) / 1000)) ms: $(ls /dev/nv | wc -l) LVs active"
  pool="--pool=name=thick,backend=lvm,vg=nv,type=thick"

  # ms since T0 (an $EPOCHREALTIME)
  since() { echo $(((${EPOCHREALTIME/./} - ${1/./}) / 1000)); }
  vm_step "first start: nodevold adopts the $lvs LVs as volumes"
  t0=$EPOCHREALTIME
  vm_nodevold_start "$pool"
  vm_log "answered after $(since "$t0") ms (incl. nodevolctl's own start, polled every 100 ms)"
  n=$(vm_ctl volume list | grep -c ' thick ' || true)
  vm_log "$n volumes listed"
  vm_nodevold_stop
  rss_line() {
    awk '/VmRSS|VmHWM/ {printf "%s %s kB  ", $1, $2}' "/proc/$1/status"
    # and its reaped children's (the lvm commands it ran): their CPU
    # against their wall time says whether lvm worked longer or waited.
    awk -v hz="$(getconf CLK_TCK)" '{sub(/.*\) /, ""); printf "CPU user %.2f s, system %.2f s; children user %.2f s, system %.2f s", $12/hz, $13/hz, $14/hz, $15/hz}' "/proc/$1/stat"
  }
  mkfifo /tmp/sleep.fifo
  exec 9<>/tmp/sleep.fifo
  for ((k = 1; k <= starts; k++)); do
    vm_step "start $k of $starts with $lvs volume records and $lvs LVs"
    : >"$VM_OUT/start.log"
    t0=$EPOCHREALTIME
    if ((k == starts)); then
      strace -f -qq -ttt --seccomp-bpf -e trace=execve,exit_group,clone,clone3 -o /tmp/start.strace \
        "$NODEVOLD" --config=/run/nodevol-vm/nodevold.conf --socket=/run/nodevol-vm/nodevold.sock \
        --state-dir=/run/nodevol-vm/state --pods-root=/run/nodevol-vm/pods --metrics-address=off \
        --log-target=stderr --log-level=info "$pool" </dev/null 9<&- >>"$VM_OUT/start.log" 2>&1 &
    else
      "$NODEVOLD" --config=/run/nodevol-vm/nodevold.conf --socket=/run/nodevol-vm/nodevold.sock \
        --state-dir=/run/nodevol-vm/state --pods-root=/run/nodevol-vm/pods --metrics-address=off \
        --log-target=stderr --log-level=info "$pool" </dev/null 9<&- >>"$VM_OUT/start.log" 2>&1 &
    fi
    pid=$!
    # Wait for the socket with builtins only (a read that times out on a
    # fifo nobody writes), then ask: a nodevolctl every 20 ms, as this did
    # before, started ~0.25 s of process on the guest's one emulated CPU
    # each time, which the lvm command of the start had to share, doubling
    # its wall time (its CPU was the same as by hand).
    until [[ -S /run/nodevol-vm/nodevold.sock ]]; do
      kill -0 "$pid" 2>/dev/null || vm_fail "nodevold exited: $(tail -5 "$VM_OUT/start.log")"
      read -rt 0.01 -u 9 || true
    done
    listening=$(since "$t0")
    until "$NODEVOLCTL" --socket /run/nodevol-vm/nodevold.sock --timeout 1 info >/dev/null 2>&1; do
      kill -0 "$pid" 2>/dev/null || vm_fail "nodevold exited: $(tail -5 "$VM_OUT/start.log")"
      read -rt 0.02 -u 9 || true
    done
    first=$(since "$t0")
    ready=$(grep -m1 -o 'ready: .*' "$VM_OUT/start.log" || true)
    d=$(pgrep -x nodevold | head -1)
    t1=$EPOCHREALTIME
    "$NODEVOLCTL" --socket /run/nodevol-vm/nodevold.sock --timeout 1 info >/dev/null
    echo "start $k: socket after $listening ms, first answer after $first ms (one nodevolctl's start included; one call to the live daemon takes $(since "$t1") ms); log: $ready; $(rss_line "$d")" |
      tee -a "$VM_OUT/result.txt"
    kill -TERM "$d"
    wait "$pid" || true
  done
  echo "the last start's log, to its first answer:" >>"$VM_OUT/result.txt"
  sed -n '1,/GetInfo/p' "$VM_OUT/start.log" | cut -c1-160 | sed 's/^/    /' >>"$VM_OUT/result.txt"
  if [[ -s /tmp/start.strace ]]; then
    echo "processes started during the last start: $(grep -c 'execve(' /tmp/start.strace)" | tee -a "$VM_OUT/result.txt"
    grep -o 'execve("[^"]*", \["[^"]*", "[^"]*"' /tmp/start.strace | sed 's/.*\[//' | sort | uniq -c | tee -a "$VM_OUT/result.txt"
    # exec to exit of each process nodevold started, from the start
    awk 'NR == 1 {t0 = $2} /execve\(/ && NR > 1 {split($0, a, "\""); c[$1] = a[4] " " a[6]; s[$1] = $2}
         /exit_group/ && ($1 in s) {printf "    %s: from %.0f to %.0f ms after exec of nodevold\n", c[$1], (s[$1]-t0)*1000, ($2-t0)*1000}' \
      /tmp/start.strace | tee -a "$VM_OUT/result.txt"
    awk 'NR == 1 {t0 = $2} /clone/ {printf "    clone by %s at %.0f ms\n", $1, ($2-t0)*1000}' /tmp/start.strace | head -30 >>"$VM_OUT/result.txt"
  fi
  # The floors: the same report by hand, and nodevolctl answering a live daemon.
  # nodevold's exact arguments (report.cc), its environment, its output
  # read through a pipe.
  args=(fullreport --reportformat json --units b --nosuffix --config 'report/time_format="%s"'
    --configreport vg -o vg_name,vg_uuid,vg_size,vg_free,vg_extent_size,vg_tags
    --configreport pv -o pv_name,vg_name,pv_size,pv_free
    --configreport lv -o lv_name,lv_uuid,vg_name,lv_path,lv_size,lv_attr,lv_tags,pool_lv,origin,lv_time,data_percent,metadata_percent,lv_metadata_size,lv_kernel_major,lv_kernel_minor
    --configreport pvseg -o pvseg_start --configreport seg -o seg_size)
  for i in 1 2 3; do
    t0=$EPOCHREALTIME
    cpu=$( { TIMEFORMAT='user %U s, system %S s'; time env -i LC_ALL=C DM_DISABLE_UDEV=1 /usr/sbin/lvm "${args[@]}" 9<&- | cat >/dev/null; } 2>&1)
    echo "floor: nodevold's lvm fullreport by hand, piped: $(since "$t0") ms ($cpu)" | tee -a "$VM_OUT/result.txt"
  done
  if [[ -n ${START_BENCH_VARIANTS:-} ]]; then
    t0=$EPOCHREALTIME
    (ulimit -n 4096; env -i LC_ALL=C DM_DISABLE_UDEV=1 /usr/sbin/lvm "${args[@]}" </dev/null | cat >/dev/null)
    echo "variant: ulimit -n 4096, stdin /dev/null: $(since "$t0") ms" | tee -a "$VM_OUT/result.txt"
    "$NODEVOLD" --config=/run/nodevol-vm/nodevold.conf --socket=/run/nodevol-vm/nodevold.sock \
      --state-dir=/run/nodevol-vm/state --pods-root=/run/nodevol-vm/pods --metrics-address=off \
      --log-target=stderr --log-level=info "$pool" </dev/null >>"$VM_OUT/v.log" 2>&1 &
    until "$NODEVOLCTL" --socket /run/nodevol-vm/nodevold.sock --timeout 1 info >/dev/null 2>&1; do sleep 0.1; done
    sleep 3
    lvm lvchange -qq --addtag x nv/nv-vol1
    strace -f -qq -ttt --seccomp-bpf -e trace=execve,exit_group -o /tmp/v.strace -p "$(pgrep -x nodevold)" &
    sleep 1
    t0=$EPOCHREALTIME
    "$NODEVOLCTL" --socket /run/nodevol-vm/nodevold.sock capacity >/dev/null
    echo "variant: a capacity call on an idle nodevold after an lvchange: $(since "$t0") ms" | tee -a "$VM_OUT/result.txt"
    sleep 1; pkill strace; sleep 0.5
    awk '/execve\(/ {split($0, a, "\""); c[$1] = a[4] " " a[6]; s[$1] = $2}
         /exit_group/ && ($1 in s) {printf "    %s: %.0f ms\n", c[$1], ($2-s[$1])*1000}' /tmp/v.strace | tee -a "$VM_OUT/result.txt"
    kill "$(pgrep -x nodevold)"; sleep 2
  fi
  t0=$EPOCHREALTIME
  lvm fullreport --reportformat json --units b --nosuffix >/dev/null
  echo "floor: lvm fullreport with its default columns: $(since "$t0") ms" | tee -a "$VM_OUT/result.txt"
  exit 0
fi

build=$repo/build lvs=1000 starts=3
while (($#)); do
  case $1 in
    --build) build=$(cd "${2:?}" && pwd); shift 2 ;;
    --lvs) lvs=${2:?}; shift 2 ;;
    --starts) starts=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "lvm_start_bench_run.sh: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d "${TMPDIR:-/tmp}/lvm-start-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
rc=0
"$here/vm-run" --work-dir "$work/vm" --keep --cache-dir "$build/vm-cache" --mem 1024 --timeout 1800 --disk lvm1:6G \
  --env NODEVOLD="$build/mountd/nodevold" --env NODEVOLCTL="$build/ctl/nodevolctl" \
  --env START_BENCH_VARIANTS="${START_BENCH_VARIANTS:-}" \
  -- "$here/lvm_start_bench_run.sh" --guest "$lvs" "$starts" >&2 || rc=$?
cat "$work/vm/share/out/result.txt" 2>/dev/null || true
exit "$rc"
