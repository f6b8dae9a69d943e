#!/bin/bash
# Runs inside a vm-run guest (tests/vm/CMakeLists.txt: vm_lvm_crash): kill -9
# of nodevold in the middle of CreateVolume, DeleteVolume and ExpandVolume on
# a thick and a thin LVM pool sharing VG nv, and in Publish and Unpublish,
# where an LVM volume is staged (its LV mounted below <state>/staging) and
# unstaged, a restart after each kill, and
# the invariants of README's "Guarantees" checked after every restart:
#   (a) every LV tagged nodevol.io/managed (but the thin pool) belongs to a
#       volume nodevolctl lists: no orphan LV;
#   (b) every volume that was READY before the round is still listed READY,
#       its LV exists and its marker file (written through a publication)
#       reads back, published ones through their pod target; the volume
#       being deleted is exempt;
#   (c) the interrupted call resolves: a DeleteVolume recorded as "deleting"
#       is finished by the restart's reconcile; retrying the same create
#       gives a READY volume whose filesystem takes a publication, a write
#       and a read; retrying the delete removes the LV; retrying the expand
#       grows the published filesystem (statfs); retrying the publish
#       mounts the volume at its target, once, and so does a repeat
#       publish on the same target; retrying the unpublish leaves the
#       target and the staging dir unmounted;
#   (d) nothing is mounted under <state>/staging for a volume that does not
#       exist, nothing under the pods root that no publication explains, and
#       every recorded publication is mounted;
#   (e) nothing is staged for a volume without a publication: a reconcile
#       that rolls back an interrupted publish without unstaging leaks the
#       staging mount, and fails here;
#   (f) snapshots (docs/snapshots.md) of the thin pool's published volume:
#       every LV tagged nodevol.io/snapshot belongs to a listed snapshot,
#       every READY snapshot has its LV and every snapshot READY before the
#       round still is; a retried snapshot create is READY; a retried
#       restore (--from-snapshot) or clone (--from-volume), grown by 32 MiB,
#       is READY and holds the source's marker as of the snapshot (or now);
#       a retried snapshot delete removes its LV, and one recorded as
#       "deleting" at the kill is finished by the restart's reconcile.
#
# An aimed round whose program never started during the call fails: it
# would be a kill between calls that claims to be inside one.
# Each round names where it kills: after a random delay ("time"), or a
# random moment after the daemon starts a given program (lvcreate, mkfs.ext4,
# lvremove, resize2fs, lvextend; for snapshots too), which a delay alone hits too rarely under
# emulation (mkfs of a small volume takes ~0.2 s). Two kill modes: "all"
# kills nodevold and the tool it is running (as systemd's KillMode=mixed and
# a container runtime do, so an lvm command dies half-way); "daemon" kills
# nodevold alone and its tool runs on, orphaned, while the new nodevold
# starts (a retry is also tried at once, and may fail while the orphan
# runs, before the one that must succeed).
#
#   lvm_crash_test.sh         disks: "lvm1" (2G)   env: NODEVOLD, NODEVOLCTL
# Optional env: CRASH_ROUNDS=short|all (default all) picks the schedule
# below; CRASH_SEED=N repeats a run's random choices (each run prints
# its seed); CRASH_SABOTAGE=orphan-lv|orphan-snapshot|marker|stray-mount|staging-mount
# breaks one invariant behind nodevold's back after the first restart, to
# show the checks fire (the test must then fail, naming it).
source "$VM_LIB"

export DM_DISABLE_UDEV=1  # for the lvm commands this script runs itself
export LVM_SUPPRESS_FD_WARNINGS=1  # they inherit the fd nap() reads
MiB=$((1024 * 1024))
seed=${CRASH_SEED:-$RANDOM}
RANDOM=$seed
sabotage=${CRASH_SABOTAGE:-}
disk=$(vm_disk lvm1)
pools=(--pool=name=thick,backend=lvm,vg=nv,type=thick,devices=$disk
       --pool=name=thin,backend=lvm,vg=nv,type=thin,thinpool=tp,thinpool-size=50%,overprovision=2)
size=32Mi
check_dir=/run/crash-check
mkdir -p "$check_dir"

source "$(dirname "$0")/crash_lib.sh"

# REC: the state in a volume's (or with "snapshots", a snapshot's) record
# file ("none" without one).
record_state() {
  local f=$VM_STATE/${2:-volumes}/$1.json line
  REC=none
  [[ -e $f ]] || return 0
  REC=unreadable
  while IFS= read -r line; do
    [[ $line =~ \"state\":\ *\"([a-z]+)\" ]] && REC=${BASH_REMATCH[1]}
  done <"$f"
  return 0
}

# MNT: the mount points below a directory; MNT_OPTS[mount point]: its
# per-mount options (ro/rw, nosuid, nodev, noexec, atime).
declare -A MNT_OPTS
mounts_below() {
  MNT=() MNT_OPTS=()
  local id parent dev root mp opts rest
  while read -r id parent dev root mp opts rest; do
    [[ $mp == "$1"/* ]] && MNT+=("$mp") && MNT_OPTS[$mp]=$opts
  done </proc/self/mountinfo
  return 0
}
is_mounted() { mounts_below "${1%/*}"; local m; for m in "${MNT[@]}"; do [[ $m == "$1" ]] && return 0; done; return 1; }

bytes_of() { echo $(($(stat -f -c '%b' "$1") * $(stat -f -c '%S' "$1"))); }

# LISTED[name]=STATE and LISTED_TARGET[target]=name, from nodevolctl.
declare -A LISTED LISTED_TARGET
load_listing() {
  LISTED=() LISTED_TARGET=()
  local json line name=""
  json=$(vm_ctl -o json volume list 2>&1) || vm_fail "volume list: $json"
  while IFS= read -r line; do
    if [[ $line =~ ^\ *\"name\":\ \"([^\"]+)\" ]]; then name=${BASH_REMATCH[1]}
    elif [[ $line =~ ^\ *\"state\":\ \"VOLUME_STATE_([A-Z]+)\" ]]; then LISTED[$name]=${BASH_REMATCH[1]}
    elif [[ $line =~ \"($VM_PODS/[^\"]+)\" ]]; then LISTED_TARGET[${BASH_REMATCH[1]}]=$name
    fi
  done <<<"$json"
}

# SNAP_LISTED[name]=STATE, from nodevolctl.
declare -A SNAP_LISTED
load_snapshots() {
  SNAP_LISTED=()
  local json line name=""
  json=$(vm_ctl -o json snapshot list 2>&1) || vm_fail "snapshot list: $json"
  while IFS= read -r line; do
    if [[ $line =~ ^\ *\"name\":\ \"([^\"]+)\" ]]; then name=${BASH_REMATCH[1]}
    elif [[ $line =~ ^\ *\"state\":\ \"VOLUME_STATE_([A-Z]+)\" ]]; then SNAP_LISTED[$name]=${BASH_REMATCH[1]}
    fi
  done <<<"$json"
}

# LV_OF[volume]=LV for every LV tagged nodevol.io/managed, SNAP_LV_OF[snapshot]
# for those tagged nodevol.io/snapshot; PROBLEMS gets managed LVs that name
# neither.
declare -A LV_OF SNAP_LV_OF
load_lvs() {
  LV_OF=() SNAP_LV_OF=()
  local out name tags
  out=$(lvm lvs --noheadings --separator '|' -o lv_name,lv_tags nv 2>&1) || vm_fail "lvs: $out"
  while IFS='|' read -r name tags; do
    name=${name//[[:space:]]/}
    [[ ,$tags, == *,nodevol.io/managed,* ]] || continue
    [[ $name == tp ]] && continue  # the thin pool
    if [[ $tags =~ nodevol.io/volume=([^,]+) ]]; then LV_OF[${BASH_REMATCH[1]}]=$name
    elif [[ $tags =~ nodevol.io/snapshot=([^,]+) ]]; then SNAP_LV_OF[${BASH_REMATCH[1]}]=$name
    else PROBLEMS+=("(a) LV nv/$name is tagged nodevol.io/managed but names no volume or snapshot"); fi
  done <<<"$out"
}

# The marker of a volume: through its pod target, its staging mount, or a
# read-only mount of its LV of our own.
read_marker() {  # VOLUME -> MARKER (or "<why not>")
  local v=$1 dev
  if [[ -n ${EXP_TARGET[$v]} ]]; then
    MARKER=$(cat "${EXP_TARGET[$v]}/marker" 2>&1) || MARKER="<unreadable through ${EXP_TARGET[$v]}: $MARKER>"
    return 0
  fi
  local staging=$VM_STATE/staging/${EXP_POOL[$v]}/$v
  if is_mounted "$staging"; then
    MARKER=$(cat "$staging/marker" 2>&1) || MARKER="<unreadable through $staging: $MARKER>"
    return 0
  fi
  dev=/dev/nv/${LV_OF[$v]}
  [[ -b $dev ]] || { MARKER="<$dev is not there: LV inactive>"; return 0; }
  if ! out=$(mount -o ro -t ext4 "$dev" "$check_dir" 2>&1); then MARKER="<mount $dev: $out>"; return 0; fi
  MARKER=$(cat "$check_dir/marker" 2>&1) || MARKER="<unreadable on $dev: $MARKER>"
  umount "$check_dir" || vm_fail "umount $check_dir"
}

# EXP_*: the volumes that are READY between rounds, with what they hold.
declare -A EXP_POOL EXP_MARKER EXP_TARGET EXP_OPTS
# EXP_SNAP[snapshot]: the marker its source held when it was taken.
declare -A EXP_SNAP
EXP_GROW_THICK=0 EXP_GROW_THIN=0

# check_invariants WHEN EXEMPT: (a), (b), (d) as in the header; fails the test
# with every broken one listed.
check_invariants() {
  local when=$1 exempt=${2:-} v m rel name
  PROBLEMS=()
  load_listing
  load_snapshots
  load_lvs
  for v in "${!SNAP_LV_OF[@]}"; do
    [[ -n ${SNAP_LISTED[$v]:-} ]] || PROBLEMS+=("(f) orphan snapshot LV nv/${SNAP_LV_OF[$v]}: snapshot $v is not listed")
  done
  for v in "${!SNAP_LISTED[@]}"; do
    [[ ${SNAP_LISTED[$v]} != READY || -n ${SNAP_LV_OF[$v]:-} ]] || PROBLEMS+=("(f) snapshot $v is listed READY but has no LV")
  done
  for v in "${!EXP_SNAP[@]}"; do
    [[ $v == "$exempt" || ${SNAP_LISTED[$v]:-} == READY ]] ||
      PROBLEMS+=("(f) snapshot $v was READY, now ${SNAP_LISTED[$v]:-not listed}")
  done
  for v in "${!LV_OF[@]}"; do
    [[ -n ${LISTED[$v]:-} ]] || PROBLEMS+=("(a) orphan LV nv/${LV_OF[$v]}: volume $v is not listed")
  done
  for v in "${!LISTED[@]}"; do
    [[ ${LISTED[$v]} != READY || -n ${LV_OF[$v]:-} ]] || PROBLEMS+=("(b) volume $v is listed READY but has no LV")
  done
  for v in "${!EXP_POOL[@]}"; do
    [[ $v == "$exempt" ]] && continue
    if [[ ${LISTED[$v]:-} != READY ]]; then
      PROBLEMS+=("(b) volume $v was READY, now ${LISTED[$v]:-not listed}")
      continue
    fi
    [[ -n ${LV_OF[$v]:-} ]] || continue  # said above
    read_marker "$v"
    [[ $MARKER == "${EXP_MARKER[$v]}" ]] || PROBLEMS+=("(b) marker of $v reads '$MARKER', want '${EXP_MARKER[$v]}'")
    if [[ -n ${EXP_TARGET[$v]} ]]; then
      [[ ${LISTED_TARGET[${EXP_TARGET[$v]}]:-} == "$v" ]] || PROBLEMS+=("(b) $v is no longer listed as published at ${EXP_TARGET[$v]}")
    fi
  done
  mounts_below "$VM_STATE/staging"
  for m in "${MNT[@]}"; do
    rel=${m#"$VM_STATE"/staging/}
    name=${rel#*/}
    [[ -n ${LISTED[$name]:-} ]] || PROBLEMS+=("(d) staging mount $m, and no volume $name is listed")
    [[ -z ${LISTED[$name]:-} || " ${LISTED_TARGET[*]} " == *" $name "* ]] ||
      PROBLEMS+=("(e) staging mount $m of $name, which has no publication: leaked")
  done
  mounts_below "$VM_PODS"
  local -A mounted=()
  for m in "${MNT[@]}"; do
    mounted[$m]=1
    [[ -n ${LISTED_TARGET[$m]:-} ]] || PROBLEMS+=("(d) $m is mounted and no publication explains it")
  done
  for m in "${!LISTED_TARGET[@]}"; do
    [[ -n ${mounted[$m]:-} ]] || PROBLEMS+=("(d) $m is recorded as a publication of ${LISTED_TARGET[$m]} but not mounted")
  done
  for v in "${!EXP_TARGET[@]}"; do
    m=${EXP_TARGET[$v]}
    [[ -n $m && -n ${mounted[$m]:-} ]] || continue
    [[ ${MNT_OPTS[$m]} == "${EXP_OPTS[$v]}" ]] ||
      PROBLEMS+=("(d) the publication of $v at $m was mounted ${EXP_OPTS[$v]}, is now ${MNT_OPTS[$m]}")
  done
  if ((${#PROBLEMS[@]})); then
    echo "FAIL: invariants broken $when:"
    printf '    %s\n' "${PROBLEMS[@]}"
    echo "    volumes: $(for v in "${!LISTED[@]}"; do printf '%s=%s ' "$v" "${LISTED[$v]}"; done)"
    echo "    snapshots: $(for v in "${!SNAP_LISTED[@]}"; do printf '%s=%s ' "$v" "${SNAP_LISTED[$v]}"; done)"
    echo "    LVs: $(lvm lvs --noheadings -o lv_name,lv_attr,lv_tags nv 2>&1 | tr -s ' \n' ' ')"
    echo "    mounts: $(grep -E " ($VM_STATE|$VM_PODS)/" /proc/self/mountinfo | cut -d' ' -f5 | tr '\n' ' ')"
    vm_fail "invariants broken $when (seed $seed)"
  fi
  vm_log "invariants hold $when: ${#LISTED[@]} volumes, ${#LV_OF[@]} volume LVs, ${#SNAP_LISTED[@]} snapshots, $((${#mounted[@]})) pod mounts"
}

# publish_marker VOLUME POOL: publishes the volume into a pod, writes a
# marker, reads it back; with "keep" the publication stays.
publish_marker() {
  local v=$1 pool=$2 keep=${3:-} t
  t=$(vm_target "pod-$v" "$v")
  ctl_quiet publish --volume "$v" --target "$t"
  EXP_MARKER[$v]="volume $v, written at $(now_us)"
  echo "${EXP_MARKER[$v]}" >"$t/marker" || vm_fail "cannot write into the filesystem of $v"
  sync
  [[ $(<"$t/marker") == "${EXP_MARKER[$v]}" ]] || vm_fail "marker of $v does not read back"
  EXP_POOL[$v]=$pool EXP_TARGET[$v]=
  if [[ $keep == keep ]]; then
    EXP_TARGET[$v]=$t
    mounts_below "${t%/*}"
    EXP_OPTS[$v]=${MNT_OPTS[$t]}
    vm_log "$v published at $t: ${EXP_OPTS[$v]}"
    return 0
  fi
  ctl_quiet unpublish --target "$t"
}

# expect_marker VOLUME POOL WANT: publishes the volume into a new pod, its
# marker must read WANT; unpublished again.
expect_marker() {
  local v=$1 t got
  t=$(vm_target "pod-check-$v" "$v")
  ctl_quiet publish --volume "$v" --target "$t"
  got=$(cat "$t/marker" 2>&1) || got="<unreadable: $got>"
  ctl_quiet unpublish --target "$t"
  [[ $got == "$3" ]] || vm_fail "$v holds marker '$got', want its source's '$3' (seed $seed)"
}

drift_lines() {  # what the restart's reconcile reported (nodevolctl info)
  local info
  info=$(vm_ctl info 2>&1) || vm_fail "info: $info"
  DRIFT=$(sed -n '/^Drift/,$p' <<<"$info" | sed '1s/^Drift: *//; s/^  //' | grep -v '^$' || true)
}

# ---------------------------------------------------------------- set-up
vm_step "nodevold with a thick and a thin pool on VG nv ($disk); seed $seed${sabotage:+; sabotage: $sabotage}"
vm_nodevold_start "${pools[@]}"
vm_log "$(lvm lvs --noheadings -o lv_name,lv_attr,lv_size nv | tr -s ' ')"

vm_step "two published volumes (expanded later) with markers"
for pool in thick thin; do
  ctl_quiet volume create "g-$pool" --pool "$pool" --size "$size"
  publish_marker "g-$pool" "$pool" keep
done
EXP_GROW_THICK=$((32 * MiB)) EXP_GROW_THIN=$((32 * MiB))
check_invariants "after set-up"

# ---------------------------------------------------------------- rounds
# op pool anchor lo_ms hi_ms mode: kill at a random moment lo..hi ms after
# the anchor (the call's start for "time", the call waiting in nodevold's
# listen backlog while nodevold is held stopped for "sent", the volume's
# staging mount appearing for "staged", its publication record appearing or
# turning "unpublishing" for "record", else the daemon starting that
# program); "delete"s take the oldest unpublished volume of the pool, the
# "expand"s the pool's published g- volume.
schedule=(
  "create thick lvcreate 0 600 all"
  "create thin time 300 2800 daemon"
  "delete thick lvremove 0 300 daemon"
  "create thick mkfs.ext4 0 120 all"
  "expand thick resize2fs 0 100 all"
  "delete thin time 500 1500 all"
  "create thin mkfs.ext4 0 120 daemon"
  "delete thick time 500 1500 all"
  "expand thin lvextend 0 500 daemon"
  "delete thin lvremove 0 300 all"
  "create thin lvcreate 0 600 all"
  "publish thick staged 0 30 all"
  "unpublish thick sent 0 40 all"
  "publish thin sent 0 150 daemon"
  "unpublish thin sent 0 20 daemon"
  "snapshot thin lvcreate 0 600 all"
  "restore thin lvcreate 0 600 daemon"
  "snapshot thin time 100 1500 daemon"
  "clone thin resize2fs 0 150 all"
  "restore thin lvextend 0 400 all"
  "unsnapshot thin lvremove 0 300 all"
  "clone thin time 300 2500 daemon"
  "unsnapshot thin sent 0 40 daemon"
)
# CRASH_ROUNDS=short (the gate, scripts/test): one round of each kind of
# call, both kill modes, in an order whose deletes, unpublishes, restores
# and unsnapshots find what they need; the whole schedule runs in the long
# tier (vm_lvm_crash_all, docs/testing.md "Tiers").
if [[ ${CRASH_ROUNDS:-all} == short ]]; then
  schedule=(
    "create thick lvcreate 0 600 all"
    "delete thick lvremove 0 300 daemon"
    "create thin mkfs.ext4 0 120 daemon"
    "expand thin lvextend 0 500 daemon"
    "publish thick staged 0 30 all"
    "unpublish thick sent 0 40 all"
    "snapshot thin lvcreate 0 600 all"
    "restore thin lvcreate 0 600 daemon"
    "unsnapshot thin lvremove 0 300 all"
  )
elif [[ ${CRASH_ROUNDS:-all} != all ]]; then
  vm_fail "CRASH_ROUNDS=${CRASH_ROUNDS}: short or all"
fi
declare -A last_pub=()  # the volume the pool's last publish round published
declare -A queue=([thick]="" [thin]="")  # unpublished volumes, oldest first
snaps=""  # snapshots of g-thin, oldest first
round=0 interrupted=0
for entry in "${schedule[@]}"; do
  read -r op pool anchor lo hi mode <<<"$entry"
  round=$((round + 1))
  case $op in
    create) vol=c$round-$pool; args=(volume create "$vol" --pool "$pool" --size "$size") ;;
    delete)
      vol=${queue[$pool]%% *}
      queue[$pool]=${queue[$pool]#"$vol"}
      queue[$pool]=${queue[$pool]# }
      args=(volume delete "$vol") ;;
    expand)
      vol=g-$pool
      if [[ $pool == thick ]]; then old=$EXP_GROW_THICK; else old=$EXP_GROW_THIN; fi
      new=$((old + 32 * MiB))
      statfs_before=$(bytes_of "${EXP_TARGET[$vol]}")
      args=(volume expand "$vol" --size "$new") ;;
    publish)  # a new volume with a marker, published into a new pod
      vol=p$round-$pool
      ctl_quiet volume create "$vol" --pool "$pool" --size "$size"
      publish_marker "$vol" "$pool"
      t=$(vm_target "pod-k$round" "$vol")
      args=(publish --volume "$vol" --target "$t") ;;
    unpublish)
      vol=${last_pub[$pool]:?no publish round for pool $pool before this unpublish}
      t=${EXP_TARGET[$vol]}
      args=(unpublish --target "$t") ;;
    snapshot)  # of the pool's published g- volume
      vol=s$round; src=g-$pool
      args=(snapshot create "$vol" --volume "$src") ;;
    restore|clone)  # 32 MiB bigger than the source: lvextend and resize2fs too
      vol=$op$round-$pool
      if [[ $op == restore ]]; then
        src=${snaps##* }
        [[ -n $src ]] || vm_fail "no snapshot before round $round"
        want=${EXP_SNAP[$src]}
        grow=$(vm_json_get "$(vm_ctl -o json snapshot get "$src")" size_bytes)
        args=(volume create "$vol" --pool "$pool" --size $((grow + 32 * MiB)) --from-snapshot "$src")
      else
        src=g-$pool want=${EXP_MARKER[g-$pool]}
        if [[ $pool == thick ]]; then grow=$EXP_GROW_THICK; else grow=$EXP_GROW_THIN; fi
        args=(volume create "$vol" --pool "$pool" --size $((grow + 32 * MiB)) --from-volume "$src")
      fi ;;
    unsnapshot)
      vol=${snaps%% *}
      snaps=${snaps#"$vol"}
      snaps=${snaps# }
      args=(snapshot delete "$vol") ;;
  esac
  vm_step "round $round/${#schedule[@]}: $op $vol ($pool), kill -9 [$mode] at ${anchor}+${lo}..${hi}ms"

  # -- the call, and the kill
  ctl_out=${VM_OUT:-/tmp}/round-$round.ctl
  # "sent": nodevold is stopped (SIGSTOP) until the call waits in its
  # listen backlog, then continued: the delay counts from a call that is
  # surely there, and nodevolctl's own start-up does not eat it.
  [[ $anchor == sent ]] && kill -STOP "$VM_NODEVOLD_PID"
  t0=$(now_us)
  vm_ctl --timeout 60 "${args[@]}" >"$ctl_out" 2>&1 &
  ctl_pid=$!
  rand_delay "lo * 1000" "hi * 1000"
  delay=$DELAY
  seen=""
  if [[ $anchor == time ]]; then
    while (($(us_since "$t0") < delay)); do nap 0.01; done
  else
    deadline=$((t0 + 20000000))
    while :; do
      if [[ $anchor == staged ]]; then
        is_mounted "$VM_STATE/staging/$pool/$vol" && seen=$(us_since "$t0")
      elif [[ $anchor == sent ]]; then
        (($(pending_calls) > 0)) && seen=$(us_since "$t0")
      elif [[ $anchor == record ]]; then
        pub_record_in_call "$op" "$t" && seen=$(us_since "$t0")
      else
        daemon_children
        for d in "${KID_DESC[@]}"; do [[ $d == "$anchor" || $d == "lvm $anchor" ]] && seen=$(us_since "$t0"); done
      fi
      [[ -n $seen ]] && break
      alive "$ctl_pid" || break
      (($(now_us) < deadline)) || break
      nap 0.003  # a mkfs of 32 MiB lasts ~0.2 s under TCG: poll often
    done
    [[ $anchor == sent ]] && kill -CONT "$VM_NODEVOLD_PID"
    if [[ -n $seen ]]; then
      t_anchor=$(now_us)
      while (($(us_since "$t_anchor") < delay)); do nap 0.01; done
    fi
  fi
  daemon_children
  killed_at=$(us_since "$t0")
  if [[ $mode == all ]]; then
    for k in "${KIDS[@]}"; do kill -9 -- "-$k" "$k" 2>/dev/null || true; done
  fi
  kill -9 "$VM_NODEVOLD_PID"
  orphans=()
  [[ $mode == daemon ]] && orphans=("${KIDS[@]}")
  wait "$VM_NODEVOLD_PID" 2>/dev/null || true
  ctl_rc=0
  wait "$ctl_pid" || ctl_rc=$?
  if [[ $op == snapshot || $op == unsnapshot ]]; then record_state "$vol" snapshots; else record_state "$vol"; fi
  rec_at_kill=$REC
  staged=no
  is_mounted "$VM_STATE/staging/$pool/$vol" && staged=yes
  # The LV, unless an orphaned lvm command holds the VG lock: the restart
  # must not wait for it.
  lv_state="? (lvm still running)"
  if [[ $mode == all ]]; then
    lv=nv-$vol
    [[ $op == snapshot || $op == unsnapshot ]] && lv=nvs-$vol
    lv_state=$(lvm lvs --noheadings -o lv_attr "nv/$lv" 2>/dev/null | tr -d ' ') || true
    case $lv_state in
      "") lv_state=absent ;;
      ????a*) lv_state=active ;;
      *) lv_state="inactive ($lv_state)" ;;
    esac
  fi
  ((ctl_rc != 0)) && interrupted=$((interrupted + 1))
  where="killed at +$(secs "$killed_at")s"
  if [[ $anchor != time ]]; then
    [[ -n $seen ]] || vm_fail "round $round: $anchor never started during the call (it ended first, or the program is not run any more; the call said: $(tail -1 "$ctl_out")): the kill was not inside $anchor, so the round proves nothing it claims (seed $seed)"
    where+=" ($anchor started at +$(secs "$seen")s)"
  fi
  vm_log "$where; running: ${KID_DESC[*]:-nothing}; record: $rec_at_kill; LV: $lv_state; staging mounted: $staged"
  vm_log "the call: exit $ctl_rc: $(tail -1 "$ctl_out")"

  # -- restart, and what reconcile says
  vm_nodevold_start "${pools[@]}"
  drift_lines
  vm_log "reconcile: ${DRIFT:-nothing}" | sed '2,$s/^/               /'
  early=""
  if ((${#orphans[@]})); then
    running=()
    for k in "${orphans[@]}"; do alive "$k" && running+=("$k"); done
    if ((${#running[@]})); then
      vm_log "orphaned tool still running after the restart (pids ${running[*]}); retrying at once"
      if out=$(vm_ctl "${args[@]}" 2>&1); then early=ok; else early=failed; fi
      vm_log "immediate retry: $early: $(tail -1 <<<"$out")"
      for k in "${running[@]}"; do
        for _ in $(seq 300); do alive "$k" || break; nap 0.1; done
        alive "$k" && vm_fail "orphaned tool $k still runs 30 s after the kill"
      done
    fi
  fi

  # -- (c): a deletion recorded before the kill is finished by reconcile
  if [[ $op == delete && $rec_at_kill == deleting && -z $early ]]; then
    load_listing
    [[ -z ${LISTED[$vol]:-} ]] ||
      vm_fail "volume $vol was recorded as deleting at the kill; after the restart it is still listed (${LISTED[$vol]}): reconcile did not finish the deletion. Drift: $DRIFT"
  fi
  if [[ $op == unsnapshot && $rec_at_kill == deleting && -z $early ]]; then
    load_snapshots
    [[ -z ${SNAP_LISTED[$vol]:-} ]] ||
      vm_fail "snapshot $vol was recorded as deleting at the kill; after the restart it is still listed (${SNAP_LISTED[$vol]}): reconcile did not finish the deletion. Drift: $DRIFT"
  fi

  if [[ $sabotage && $round == 1 ]]; then
    case $sabotage in
      orphan-lv) lvm lvcreate -q -y -n nv-ghost -L 8m --addtag nodevol.io/managed --addtag nodevol.io/volume=ghost nv >/dev/null ;;
      orphan-snapshot) lvm lvcreate -q -y -n nvs-ghost -L 8m --addtag nodevol.io/managed --addtag nodevol.io/snapshot=ghost nv >/dev/null ;;
      marker) echo tampered >"${EXP_TARGET[g-thick]}/marker" ;;
      stray-mount) mkdir -p "$VM_PODS/stray/volumes/x~y/z" && mount -t tmpfs none "$VM_PODS/stray/volumes/x~y/z" ;;
      staging-mount) mkdir -p "$VM_STATE/staging/thin/ghost" && mount -t tmpfs none "$VM_STATE/staging/thin/ghost" ;;
      *) vm_fail "unknown CRASH_SABOTAGE=$sabotage" ;;
    esac
    vm_log "SABOTAGE: $sabotage (the checks below must fail)"
  fi
  exempt=""
  [[ $op == delete || $op == unpublish || $op == unsnapshot ]] && exempt=$vol
  check_invariants "after the restart of round $round" "$exempt"

  # -- (c): the same call again succeeds, and the outcome is usable
  t1=$(now_us)
  out=$(vm_ctl "${args[@]}" 2>&1) || vm_fail "round $round: retrying '${args[*]}' after the restart failed: $out"
  retry_s=$(secs "$(us_since "$t1")")
  case $op in
    create)
      json=$(vm_ctl -o json volume get "$vol")
      [[ $(vm_json_get "$json" state) == VOLUME_STATE_READY ]] || vm_fail "$vol after the retried create: $json"
      publish_marker "$vol" "$pool"
      queue[$pool]+="${queue[$pool]:+ }$vol"
      vm_log "retried create: READY in ${retry_s}s; published, written, read, unpublished" ;;
    delete)
      load_lvs
      [[ -z ${LV_OF[$vol]:-} ]] || vm_fail "LV nv/${LV_OF[$vol]} of $vol is still there after the retried delete"
      vm_ctl volume get "$vol" >/dev/null 2>&1 && vm_fail "$vol is still listed after the retried delete"
      [[ ! -e $VM_STATE/staging/$pool/$vol ]] || vm_fail "staging dir of $vol left after the retried delete"
      unset "EXP_POOL[$vol]" "EXP_MARKER[$vol]" "EXP_TARGET[$vol]" "EXP_OPTS[$vol]"
      vm_log "retried delete: done in ${retry_s}s, LV gone" ;;
    expand)
      statfs_after=$(bytes_of "${EXP_TARGET[$vol]}")
      growth=$((statfs_after - statfs_before))
      ((growth >= (new - old) * 9 / 10 && statfs_after <= new)) ||
        vm_fail "after expanding $vol from $old to $new bytes statfs grew by $growth bytes (now $statfs_after)"
      json=$(vm_ctl -o json volume get "$vol")
      [[ $(vm_json_get "$json" size_bytes) == "$new" ]] || vm_fail "$vol after the retried expand: $json"
      if [[ $pool == thick ]]; then EXP_GROW_THICK=$new; else EXP_GROW_THIN=$new; fi
      vm_log "retried expand: done in ${retry_s}s; statfs $statfs_before -> $statfs_after bytes" ;;
    publish)
      # A repeat Publish on the same target (kubelet's retry) changes nothing.
      out=$(vm_ctl "${args[@]}" 2>&1) || vm_fail "round $round: a repeat '${args[*]}' failed: $out"
      n=0
      while read -r _ _ _ _ mp _; do [[ $mp == "$t" ]] && n=$((n + 1)); done </proc/self/mountinfo
      ((n == 1)) || vm_fail "round $round: $t is mounted $n times after the retried and the repeated publish, want 1"
      [[ $(<"$t/marker") == "${EXP_MARKER[$vol]}" ]] || vm_fail "round $round: $t does not show the marker of $vol"
      is_mounted "$VM_STATE/staging/$pool/$vol" || vm_fail "round $round: $vol is published but not staged"
      EXP_TARGET[$vol]=$t
      mounts_below "${t%/*}"
      EXP_OPTS[$vol]=${MNT_OPTS[$t]}
      last_pub[$pool]=$vol
      vm_log "retried publish: done in ${retry_s}s; a repeat publish kept one mount; $vol reads its marker at $t" ;;
    unpublish)
      is_mounted "$t" && vm_fail "round $round: $t is still mounted after the retried unpublish"
      is_mounted "$VM_STATE/staging/$pool/$vol" && vm_fail "round $round: $vol is still staged after its last unpublish"
      EXP_TARGET[$vol]=""
      queue[$pool]+="${queue[$pool]:+ }$vol"
      vm_log "retried unpublish: done in ${retry_s}s; target and staging unmounted" ;;
    snapshot)
      json=$(vm_ctl -o json snapshot get "$vol")
      [[ $(vm_json_get "$json" state) == VOLUME_STATE_READY ]] || vm_fail "$vol after the retried snapshot create: $json"
      EXP_SNAP[$vol]=${EXP_MARKER[$src]}
      snaps+="${snaps:+ }$vol"
      vm_log "retried snapshot create: READY in ${retry_s}s" ;;
    restore|clone)
      json=$(vm_ctl -o json volume get "$vol")
      [[ $(vm_json_get "$json" state) == VOLUME_STATE_READY ]] || vm_fail "$vol after the retried $op: $json"
      expect_marker "$vol" "$pool" "$want"
      publish_marker "$vol" "$pool"
      queue[$pool]+="${queue[$pool]:+ }$vol"
      vm_log "retried $op: READY in ${retry_s}s, holds $src's marker; published, written, read, unpublished" ;;
    unsnapshot)
      load_lvs
      [[ -z ${SNAP_LV_OF[$vol]:-} ]] || vm_fail "LV nv/${SNAP_LV_OF[$vol]} of snapshot $vol is still there after the retried delete"
      vm_ctl snapshot get "$vol" >/dev/null 2>&1 && vm_fail "snapshot $vol is still listed after the retried delete"
      unset "EXP_SNAP[$vol]"
      vm_log "retried snapshot delete: done in ${retry_s}s, LV gone" ;;
  esac
  check_invariants "after the retry of round $round"
done

# ---------------------------------------------------------------- the end
vm_log "$interrupted of ${#schedule[@]} kills interrupted their call"
((interrupted * 2 >= ${#schedule[@]})) || vm_fail "only $interrupted of ${#schedule[@]} kills landed inside their call (seed $seed)"
vm_step "a clean restart changes nothing"
vm_nodevold_stop
vm_nodevold_start "${pools[@]}"
drift_lines
vm_log "reconcile: ${DRIFT:-nothing}"
check_invariants "after a clean restart"

# A kill -9 between an lvm command's suspend and its resume (it happened in
# the restore round's lvextend under CI load) leaves the LV's device
# suspended, where any mount waits forever. Made on purpose here: the next
# start must resume it, and the volume must publish as before.
vm_step "an LV left suspended at a kill is resumed by the next start"
vol=${queue[thin]%% *}
[[ -n $vol ]] || vm_fail "no unpublished thin volume left to suspend"
kill -9 "$VM_NODEVOLD_PID"
wait "$VM_NODEVOLD_PID" 2>/dev/null || true
load_lvs
dm=nv-${LV_OF[$vol]//-/--}
dmsetup suspend "$dm" || vm_fail "dmsetup suspend $dm"
[[ $(lvm lvs --noheadings -o lv_attr "nv/${LV_OF[$vol]}" | tr -d ' ') == ????s* ]] || vm_fail "$dm is not suspended"
vm_nodevold_start "${pools[@]}"
drift_lines
vm_log "reconcile: ${DRIFT:-nothing}"
[[ $DRIFT == *"nv/${LV_OF[$vol]} was left suspended"*"resumed"* ]] || vm_fail "no drift line resuming nv/${LV_OF[$vol]}: $DRIFT"
t=$(vm_target pod-resumed "$vol")
out=$(vm_ctl --timeout 60 publish --volume "$vol" --target "$t" 2>&1) || vm_fail "publishing $vol after the resume: $out"
[[ $(<"$t/marker") == "${EXP_MARKER[$vol]}" ]] || vm_fail "$vol lost its marker"
ctl_quiet unpublish --target "$t"
check_invariants "after resuming a suspended LV"

vm_step "delete everything: only the thin pool is left, nothing mounted"
for v in "${!EXP_SNAP[@]}"; do ctl_quiet snapshot delete "$v"; done
EXP_SNAP=()
for v in "${!EXP_POOL[@]}"; do
  [[ -n ${EXP_TARGET[$v]} ]] && ctl_quiet unpublish --target "${EXP_TARGET[$v]}"
  ctl_quiet volume delete "$v"
done
EXP_POOL=() EXP_MARKER=() EXP_TARGET=() EXP_OPTS=()
check_invariants "after deleting everything"
left=$(lvm lvs --noheadings -o lv_name nv | tr -d ' ' | grep -vx tp || true)
[[ -z $left ]] || vm_fail "LVs left in nv: $left"
for p in thick thin; do
  [[ -z $(ls -A "$VM_STATE/staging/$p") ]] || vm_fail "staging dirs left in pool $p: $(ls -A "$VM_STATE/staging/$p")"
done
[[ -z $(ls -A "$VM_STATE/volumes") ]] || vm_fail "volume records left: $(ls -A "$VM_STATE/volumes")"
vm_nodevold_stop
vm_step "PASS (seed $seed)"
