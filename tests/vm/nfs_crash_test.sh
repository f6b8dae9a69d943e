#!/bin/bash
# Runs inside a vm-run guest (tests/vm/CMakeLists.txt: vm_nfs_crash): kill -9
# of nodevold in the middle of CreateVolume, Publish, Unpublish and
# DeleteVolume on an NFS pool (the guest's nfsd on loopback, nfs_lib.sh),
# where staging happens: Publish mounts the export (mount.nfs) below the
# state dir and binds from it, the last Unpublish unmounts it (umount).
# After each kill, a restart, and:
#   (a) every volume that was READY is still listed READY and its marker
#       (written through a publication) is in its directory on the server;
#   (b) every NFS mount below the pods root is a listed publication and
#       every listed publication is mounted; without any publication
#       nothing of the export stays mounted below the state dir, but a
#       staging mount the restart's reconcile reported as "used by no
#       volume" (a kill during its umount: the backend leaves it to the next
#       unpublish or delete on the export), and after the last delete
#       nothing at all;
#   (c) the interrupted call, retried, succeeds: a created volume publishes
#       and takes a marker; a publish mounts the volume at its target, once,
#       and a repeat publish on the same target changes nothing; an
#       unpublish leaves the target unmounted; a delete leaves the volume
#       unlisted and its directory gone from the server (on-delete=delete);
#   (d) every READY volume's record is on the export for the other nodes,
#       and no record there outlives its volume (kept with (a) and (b)).
# Each round kills at a random moment after the call reached nodevold
# ("sent": nodevold is held stopped until the call waits in its listen
# backlog; a delay from nodevolctl's start alone mostly kills before it has
# even connected under TCG) or after nodevold starts the named program
# (mount.nfs, umount); a round whose anchor never showed during the call
# fails: it would claim a kill inside a call that it never made. At least
# half of the rounds must interrupt their call (nodevolctl gets no answer). Two kill modes as in
# lvm_crash_test.sh: "all" (nodevold and its child) and "daemon" (the child
# runs on, orphaned).
#
#   nfs_crash_test.sh         env: NODEVOLD, NODEVOLCTL; CRASH_SEED=N replays
source "$VM_LIB"
source "$(dirname "$0")/nfs_lib.sh"

seed=${CRASH_SEED:-$RANDOM}
RANDOM=$seed

source "$(dirname "$0")/crash_lib.sh"

# in_call OP VOLUME TARGET: the call's first record change is on disk.
in_call() {
  case $1 in
    create) [[ -e $VM_STATE/volumes/$2.json ]] ;;
    delete) grep -q '"state": *"deleting"' "$VM_STATE/volumes/$2.json" 2>/dev/null ;;
    publish|unpublish*) pub_record_in_call "$1" "$3" ;;
  esac
}

# LISTED[name]=STATE, LISTED_TARGET[target]=name, SUBDIR[name], from nodevolctl.
declare -A LISTED LISTED_TARGET SUBDIR
load_listing() {
  LISTED=() LISTED_TARGET=() SUBDIR=()
  local json line name=""
  json=$(vm_ctl -o json volume list 2>&1) || vm_fail "volume list: $json"
  while IFS= read -r line; do
    if [[ $line =~ ^\ *\"name\":\ \"([^\"]+)\" ]]; then name=${BASH_REMATCH[1]}
    elif [[ $line =~ ^\ *\"state\":\ \"VOLUME_STATE_([A-Z]+)\" ]]; then LISTED[$name]=${BASH_REMATCH[1]}
    elif [[ $line =~ ^\ *\"subdir\":\ \"([^\"]+)\" ]]; then SUBDIR[$name]=${BASH_REMATCH[1]}
    elif [[ $line =~ \"($VM_PODS/[^\"]+)\" ]]; then LISTED_TARGET[${BASH_REMATCH[1]}]=$name
    fi
  done <<<"$json"
}

# EXP_MARKER[volume]: the volumes READY between rounds, with their marker;
# EXP_TARGET[volume]: where one is published ("" when it is not).
declare -A EXP_MARKER EXP_TARGET

check_invariants() {  # WHEN [EXEMPT]
  local when=$1 exempt=${2:-} v m problems=() pod_mounts staging
  load_listing
  for v in "${!EXP_MARKER[@]}"; do
    [[ $v == "$exempt" ]] && continue
    [[ ${LISTED[$v]:-} == READY ]] || { problems+=("(a) $v was READY, now ${LISTED[$v]:-not listed}"); continue; }
    m=$(cat "$NFS_EXPORT/${SUBDIR[$v]:-?}/marker" 2>&1) || m="<unreadable: $m>"
    [[ $m == "${EXP_MARKER[$v]}" ]] || problems+=("(a) marker of $v on the server reads '$m'")
    if [[ -n ${EXP_TARGET[$v]} && ${LISTED_TARGET[${EXP_TARGET[$v]}]:-} != "$v" ]]; then
      problems+=("(a) $v is no longer listed as published at ${EXP_TARGET[$v]}")
    fi
  done
  pod_mounts=$(nfs_mounts_below "$VM_PODS" | awk '{print $4}')
  for m in $pod_mounts; do
    [[ -n ${LISTED_TARGET[$m]:-} ]] || problems+=("(b) $m is mounted and no publication explains it")
  done
  for m in "${!LISTED_TARGET[@]}"; do
    grep -qxF "$m" <<<"$pod_mounts" || problems+=("(b) $m is recorded as a publication of ${LISTED_TARGET[$m]} but not mounted")
  done
  if ((${#LISTED_TARGET[@]} == 0)); then
    # A capacity poll mounts the export for a moment: allow it to go.
    for _ in $(seq 50); do
      staging=$(nfs_mounts_below "$VM_STATE" | awk '{print $4}' | while read -r m; do
        [[ $REPORTED == *"staging mount $m of "*"is used by no volume"* ]] || echo "$m"
      done)
      [[ -z $staging ]] && break
      nap 0.1
    done
    [[ -z $staging ]] || problems+=("(b) no publication, but NFS mounts below the state dir that reconcile did not report: $(tr '\n' ' ' <<<"$staging")")
  fi
  # (d) the records other nodes publish from (issue 26 item 5): one on the
  # export for every READY subdirectory volume, none for a volume nodevold
  # does not list (a record outliving its volume would let another node
  # publish a deleted volume's name).
  for v in "${!LISTED[@]}"; do
    [[ ${LISTED[$v]} == READY && -n ${SUBDIR[$v]:-} && ! -f $NFS_EXPORT/.nodevol/volumes/$v.json ]] &&
      problems+=("(d) READY $v has no record on the export")
  done
  for m in "$NFS_EXPORT"/.nodevol/volumes/*.json; do
    [[ -e $m ]] || continue
    v=$(basename "$m" .json)
    [[ -n ${LISTED[$v]:-} ]] || problems+=("(d) the export keeps a record of $v, which nodevold does not list")
  done
  if ((${#problems[@]})); then
    echo "FAIL: invariants broken $when:"
    printf '    %s\n' "${problems[@]}"
    echo "    mounts: $(nfs_mountinfo | awk '$5 ~ /^nfs/ {print $4}' | tr '\n' ' ')"
    vm_fail "invariants broken $when (seed $seed)"
  fi
  vm_log "invariants hold $when: ${#LISTED[@]} volumes, ${#LISTED_TARGET[@]} publications"
}

# publish_marker VOLUME [keep]: publish into a new pod, write the marker
# through the mount, read it on the server; "keep" leaves it published.
publish_marker() {
  local v=$1 t
  t=$(vm_target "pod-m-$v" "$v")
  ctl_quiet publish --volume "$v" --target "$t"
  EXP_MARKER[$v]="volume $v, written at $(now_us)"
  echo "${EXP_MARKER[$v]}" >"$t/marker" || vm_fail "cannot write into $v through $t"
  EXP_TARGET[$v]=""
  if [[ ${2:-} == keep ]]; then EXP_TARGET[$v]=$t; return 0; fi
  ctl_quiet unpublish --target "$t"
}

REPORTED=""  # what the last restart's reconcile reported (nodevolctl info)
claim() { echo --param nodevol.io/pvc-namespace=crash --param nodevol.io/pvc-name="$1" --param nodevol.io/pv-name="pv-$1"; }

vm_step "NFS server, nodevold with an NFS pool (on-delete=delete); seed $seed"
nfs_server_start 128m
pools=(--pool=name=shared,backend=nfs,server=127.0.0.1,share=/,on-delete=delete,timeout=20)
vm_nodevold_start "${pools[@]}"
for v in base1 base2; do
  ctl_quiet volume create "$v" --pool shared --size 10Mi $(claim "$v")
done
publish_marker base1 keep  # one publication stays: the export stays staged
publish_marker base2
check_invariants "after set-up"

# op anchor lo_ms hi_ms mode. base1's publication keeps the export staged
# for rounds 1-3; from round 5 nothing else is published, so a publish or
# create mounts the export (mount.nfs) and the last unpublish unmounts it
# (umount): those rounds aim there. An orphaned mount.nfs ("daemon" mode)
# is left to the time-aimed rounds.
schedule=(
  "publish sent 0 60 all"
  "unpublish sent 0 40 daemon"
  "create sent 0 400 all"
  "unpublish-base sent 0 30 all"
  "publish mount.nfs 0 300 all"
  "unpublish umount 0 50 all"
  "publish mount.nfs 0 100 all"
  "unpublish sent 0 20 daemon"
  "delete sent 0 300 all"
  "create mount.nfs 0 300 all"
  "delete sent 0 200 daemon"
)
round=0 last_pub="" deletable=base2 interrupted=0
for entry in "${schedule[@]}"; do
  read -r op anchor lo hi mode <<<"$entry"
  round=$((round + 1))
  case $op in
    create) vol=c$round; args=(volume create "$vol" --pool shared --size 10Mi $(claim "$vol")) ;;
    publish)
      vol=p$round
      ctl_quiet volume create "$vol" --pool shared --size 10Mi $(claim "$vol")
      publish_marker "$vol"
      t=$(vm_target "pod-k$round" "$vol")
      args=(publish --volume "$vol" --target "$t") ;;
    unpublish|unpublish-base)
      if [[ $op == unpublish-base ]]; then vol=base1; else vol=${last_pub:?no publish round before round $round}; fi
      t=${EXP_TARGET[$vol]:?$vol is not published}
      args=(unpublish --target "$t") ;;
    delete) vol=$deletable; args=(volume delete "$vol") ;;
  esac
  vm_step "round $round/${#schedule[@]}: ${args[*]:0:3}, kill -9 [$mode] at $anchor+${lo}..${hi}ms"

  # "sent": nodevold is stopped (SIGSTOP) until the call waits in its
  # listen backlog, then continued: the delay counts from a call that is
  # surely there, and nodevolctl's own start-up does not eat it.
  [[ $anchor == sent ]] && kill -STOP "$VM_NODEVOLD_PID"
  t0=$(now_us)
  vm_ctl --timeout 60 "${args[@]}" >"$VM_OUT/round-$round.ctl" 2>&1 &
  ctl_pid=$!
  rand_delay "lo * 1000" "hi * 1000"
  delay=$DELAY seen=""
  if [[ $anchor == time ]]; then
    while (($(us_since "$t0") < delay)); do nap 0.005; done
  else
    deadline=$((t0 + 20000000))
    while :; do
      if [[ $anchor == sent ]]; then
        (($(pending_calls) > 0)) && seen=$(us_since "$t0")
      elif [[ $anchor == record ]]; then
        in_call "$op" "$vol" "${t:-}" && seen=$(us_since "$t0")
      else
        daemon_children
        for d in "${KID_DESC[@]}"; do [[ $d == "$anchor" ]] && seen=$(us_since "$t0"); done
      fi
      [[ -n $seen ]] && break
      alive "$ctl_pid" || break
      (($(now_us) < deadline)) || break
      nap 0.005
    done
    [[ $anchor == sent ]] && kill -CONT "$VM_NODEVOLD_PID"
    [[ -n $seen ]] || vm_fail "round $round: $anchor never started during the call (it ended first: $(tail -1 "$VM_OUT/round-$round.ctl")): no kill inside $anchor (seed $seed)"
    t_anchor=$(now_us)
    while (($(us_since "$t_anchor") < delay)); do nap 0.005; done
  fi
  daemon_children
  killed_at=$(us_since "$t0")
  if [[ $mode == all ]]; then
    for k in "${KIDS[@]}"; do kill -9 "$k" 2>/dev/null || true; done
  fi
  kill -9 "$VM_NODEVOLD_PID"
  orphans=()
  [[ $mode == daemon ]] && orphans=("${KIDS[@]}")
  wait "$VM_NODEVOLD_PID" 2>/dev/null || true
  ctl_rc=0
  wait "$ctl_pid" || ctl_rc=$?
  ((ctl_rc != 0)) && interrupted=$((interrupted + 1))
  where="killed at +$(secs "$killed_at")s"
  [[ -n $seen ]] && where+=" ($anchor started at +$(secs "$seen")s)"
  vm_log "$where; running: ${KID_DESC[*]:-nothing}; the call: exit $ctl_rc: $(tail -1 "$VM_OUT/round-$round.ctl")"
  # An orphaned mount.nfs or umount ends by itself (loopback server).
  for k in "${orphans[@]}"; do
    for _ in $(seq 300); do alive "$k" || break; nap 0.1; done
    alive "$k" && vm_fail "orphaned $k still runs 30 s after the kill"
  done

  vm_nodevold_start "${pools[@]}"
  info=$(vm_ctl info 2>&1) || vm_fail "info: $info"
  REPORTED=$(sed -n '/^Drift/,$p' <<<"$info" | tr '\n' ' ')
  vm_log "reconcile: $REPORTED"
  exempt=""
  [[ $op == delete || $op == unpublish* ]] && exempt=$vol
  check_invariants "after the restart of round $round" "$exempt"

  out=$(vm_ctl "${args[@]}" 2>&1) || vm_fail "round $round: retrying '${args[*]}' after the restart failed: $out"
  case $op in
    create)
      json=$(vm_ctl -o json volume get "$vol")
      [[ $(vm_json_get "$json" state) == VOLUME_STATE_READY ]] || vm_fail "$vol after the retried create: $json"
      publish_marker "$vol"
      deletable=$vol
      vm_log "retried create: READY; published, written, unpublished" ;;
    publish)
      out=$(vm_ctl "${args[@]}" 2>&1) || vm_fail "round $round: a repeat '${args[*]}' failed: $out"
      n=$(nfs_mountinfo | awk -v t="$t" '$4 == t' | wc -l)
      ((n == 1)) || vm_fail "round $round: $t is mounted $n times after the retried and the repeated publish, want 1"
      [[ $(<"$t/marker") == "${EXP_MARKER[$vol]}" ]] || vm_fail "round $round: $t does not show the marker of $vol"
      EXP_TARGET[$vol]=$t last_pub=$vol
      vm_log "retried publish: one mount after a repeat publish; the marker reads at $t" ;;
    unpublish*)
      [[ -z $(nfs_mount_at "$t") ]] || vm_fail "round $round: $t is still mounted after the retried unpublish"
      EXP_TARGET[$vol]=""
      [[ $op == unpublish ]] && last_pub="" deletable=$vol
      vm_log "retried unpublish: $t unmounted" ;;
    delete)
      vm_ctl volume get "$vol" >/dev/null 2>&1 && vm_fail "$vol is still listed after the retried delete"
      [[ ! -e $NFS_EXPORT/crash-$vol-pv-$vol ]] || vm_fail "the directory of $vol is still on the server after the retried delete"
      unset "EXP_MARKER[$vol]" "EXP_TARGET[$vol]"
      vm_log "retried delete: unlisted, its directory gone" ;;
  esac
  check_invariants "after the retry of round $round"
done

vm_log "$interrupted of ${#schedule[@]} kills interrupted their call"
((interrupted * 2 >= ${#schedule[@]})) || vm_fail "only $interrupted of ${#schedule[@]} kills landed inside their call (seed $seed)"

vm_step "a clean restart changes nothing; then delete everything: nothing mounted"
vm_nodevold_stop
vm_nodevold_start "${pools[@]}"
info=$(vm_ctl info 2>&1) || vm_fail "info: $info"
REPORTED=$(sed -n '/^Drift/,$p' <<<"$info" | tr '\n' ' ')
check_invariants "after a clean restart"
for v in "${!EXP_MARKER[@]}"; do
  [[ -n ${EXP_TARGET[$v]} ]] && ctl_quiet unpublish --target "${EXP_TARGET[$v]}"
  ctl_quiet volume delete "$v"
done
EXP_MARKER=() EXP_TARGET=() REPORTED=""
check_invariants "after deleting everything"
# Only the (empty) directory of the shared records stays: no volume, no
# record, no temp of one.
left=$(nfs_export_leftovers)
[[ -z $left ]] || vm_fail "left on the server: $left"
vm_nodevold_stop
vm_step "PASS (seed $seed)"
