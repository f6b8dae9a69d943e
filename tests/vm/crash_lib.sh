# Shared by the kill -9 tests in the guest (lvm_crash_test.sh,
# nfs_crash_test.sh): small tools, builtins only where they run in a
# polling loop. Source after guest-lib.sh and after seeding RANDOM.

exec {nap_fd}<> <(:)
nap() { read -r -t "$1" -u "$nap_fd" || true; }  # sleep without a fork
now_us() { echo "${EPOCHREALTIME/./}"; }
us_since() { local n=${EPOCHREALTIME/./}; echo $((n - $1)); }
secs() { printf '%d.%02d' $(($1 / 1000000)) $(($1 % 1000000 / 10000)); }
# DELAY: uniform in [lo, hi] microseconds (in this shell: a subshell's
# RANDOM would not follow the seed).
rand_delay() { DELAY=$((($1) + (RANDOM * 32768 + RANDOM) % (($2) - ($1) + 1))); }
# nodevolctl, output shown only when it fails (which fails the test).
ctl_quiet() {
  local out
  out=$(vm_ctl "$@" 2>&1) || vm_fail "nodevolctl $* failed: $out"
}

# KIDS / KID_DESC: the processes nodevold is running now (pid, "tool verb").
daemon_children() {
  KIDS=() KID_DESC=()
  local t c cs a
  for t in /proc/"$VM_NODEVOLD_PID"/task/*/children; do
    cs=()
    read -r -a cs 2>/dev/null <"$t" || true
    for c in "${cs[@]}"; do
      a=()
      mapfile -d '' a 2>/dev/null <"/proc/$c/cmdline" || true
      a+=("" "")
      KIDS+=("$c")
      # posix_spawn's child shows nodevold's own command line until it execs.
      if [[ ${a[0]} == "$NODEVOLD" ]]; then KID_DESC+=("(spawning)")
      elif [[ ${a[0]##*/} == lvm ]]; then KID_DESC+=("lvm ${a[1]}")
      else KID_DESC+=("${a[0]##*/}"); fi
    done
  done
}

# pending_calls: connections waiting in nodevold's listen backlog (ss shows
# them as the listening socket's Recv-Q).
pending_calls() { ss -xlnH 2>/dev/null | awk -v s="$VM_SOCKET" '$5 == s {print $3; f=1} END {if (!f) print 0}'; }

# pub_record_in_call OP TARGET: the publication record of TARGET exists
# (publish) or says "unpublishing" (unpublish*): the call has begun. The
# state is in the file name (<d>.json.publishing, <d>.json,
# <d>.json.unpublishing; state/store.h), or inside a plain <d>.json of an
# older nodevold.
pub_record_in_call() {
  local f
  for f in "$VM_STATE"/publications/*.json*; do
    [[ -e $f && $f != *.corrupt ]] && grep -qF "\"$2\"" "$f" || continue
    [[ $1 == publish || $f == *.json.unpublishing ]] && return 0
    grep -q '"state": *"unpublishing"' "$f" && return 0
  done
  return 1
}

# alive PID: the process exists and is not a zombie.
alive() {
  local st=()
  read -r -a st 2>/dev/null <"/proc/$1/stat" || return 1
  # field 3 is the state; the command (field 2) has no spaces here.
  [[ ${st[2]} != Z ]]
}
