#!/bin/bash
# Runs inside a vm-run guest, twice (tests/vm/power_loss_run: vm_power_loss_ops):
# the power cut in the middle of a stream of volume operations, then the
# next boot on the same disks.
#   before: nodevold with its state dir, kubelet's pods dir and a dir pool
#           on the "persist" disk, a thick and a thin LVM pool on "lvm1",
#           and an NFS pool whose server (the guest's own nfsd, sync
#           exports) exports a directory of "persist": the cut takes the
#           server down with the client, as on a node that serves its
#           own share. Four base volumes (one per pool) are published with a synced
#           marker; then one worker runs creates, deletes, expands,
#           publishes (each writing a synced marker) and unpublishes at
#           random across the pools, logging each call's start and end to
#           the host (9p), until the power is cut (sysrq b: no sync, no
#           unmount) at a random moment 3-20 s in.
#   after:  nodevold starts on what the disks kept; then, as kubelet and the
#           provisioner would, the call in flight is made again and every
#           publication replayed. Checked: every volume whose create ended
#           (and was not deleted) is listed READY, its record at its last
#           ended size (an LVM volume's LV that size and its filesystem
#           filling it), a finished delete stays deleted, no LV or pool
#           directory without a volume (nor an NFS subdirectory or shared
#           record), every marker whose write returned reads back, and
#           after tearing everything down nothing is left.
#   power_ops_test.sh before|after   disks: persist, lvm1
source "$VM_LIB"
source "$(dirname "$0")/nfs_lib.sh"
export DM_DISABLE_UDEV=1

phase=${1:?before or after}
persist=/persist
export VM_SANDBOX=$persist/sandbox
VM_PODS=$VM_SANDBOX/pods  # as vm_nodevold_start sets it; the log is read before
pools=(--pool=name=dir,backend=dir,path=$persist/pool
       "--pool=name=thick,backend=lvm,vg=nv,type=thick,fs=ext4,devices=$(vm_disk lvm1)"
       --pool=name=thin,backend=lvm,vg=nv,type=thin,thinpool=tp,thinpool-size=40%,overprovision=2
       --pool=name=nfs,backend=nfs,server=127.0.0.1,share=/,on-delete=delete,timeout=20)
pool_names=(dir thick thin nfs)
# An NFS volume's claim, as the provisioner passes it: its subdirectory on
# the export is ops-NAME-NAME (the default pathPattern).
claim_of() { echo --param nodevol.io/pvc-namespace=ops --param nodevol.io/pvc-name="$1" --param nodevol.io/pv-name="$1"; }
target_of() { echo "$VM_PODS/$1/volumes/nodevol.io~volume/data"; }
MiB=$((1024 * 1024))

if [[ $phase == before ]]; then
  seed=${POWER_SEED:-$RANDOM}
  RANDOM=$seed
  log=$VM_OUT/ops
  : >"$log"
  note() { echo "$*" >>"$log"; }  # one write per line, to the host
  vm_step "boot 1 (seed $seed): state dir, pods dir and dir pool on a disk; thick and thin pools"
  vm_mkfs_mount ext4 persist $persist
  mkdir -p $persist/pool $persist/nfs
  nfs_server_start $persist/nfs
  vm_nodevold_start "${pools[@]}"

  # MiB size of each volume, its pool, which pod has it, what markers were
  # written; snapshots (of thin and dir volumes) and their sources' sizes.
  declare -A size pod_of pool_of snap_size snap_pool
  volumes=() pods=() snaps=()
  call() {  # OP ARGS...: logs start and end, returns nodevolctl's status
    local rc=0 out
    note "start $*"
    out=$(vm_ctl "${@:2}" 2>&1) || rc=$?
    note "done rc=$rc $1 ${*:2}"
    ((rc == 0)) || vm_log "$1 failed ($rc): $out"
    return $rc
  }
  mark() {  # POD VOLUME: a synced marker file through the pod's target
    local text="marker of $2 by $1"
    printf '%s\n' "$text" | dd of="$(target_of "$1")/marker" conv=fsync status=none &&
      note "marker $2 $text"
  }
  make_volume() {  # NAME POOL SIZE_MIB [ARGS...]
    local extra=("${@:4}")
    [[ $2 == nfs ]] && read -r -a extra <<<"$(claim_of "$1")"
    call create volume create "$1" --pool "$2" --size "${3}Mi" "${extra[@]}" >/dev/null &&
      { size[$1]=$3; pool_of[$1]=$2; volumes+=("$1"); }
  }
  forget() {  # VOLUME: out of the list of volumes
    local kept=() x
    for x in "${volumes[@]}"; do [[ $x == "$1" ]] || kept+=("$x"); done
    volumes=("${kept[@]}")
  }
  publish_volume() {  # POD VOLUME
    mkdir -p "$(target_of "$1")"
    call publish publish --target "$(target_of "$1")" --volume "$2" && { pod_of[$2]=$1; pods+=("$1"); mark "$1" "$2"; }
  }

  for p in "${pool_names[@]}"; do
    make_volume "base-$p" "$p" 32 || vm_fail "base volume in $p"
    publish_volume "pod-base-$p" "base-$p" || vm_fail "publish base-$p"
  done
  sync
  note "base done"

  cut_after=$((3000 + RANDOM % 17000))
  vm_step "operations until the power is cut, ${cut_after} ms from now"
  (
    sleep "$((cut_after / 1000)).$(printf %03d $((cut_after % 1000)))"
    echo 1 >/proc/sys/kernel/sysrq
    echo POWER-CUT
    echo b >/proc/sysrq-trigger
  ) &
  for ((i = 1; i < 400; i++)); do
    n=${#volumes[@]}
    v=${volumes[RANDOM % n]}
    case $((RANDOM % 9)) in
      0 | 1) make_volume "o-$i" "${pool_names[RANDOM % ${#pool_names[@]}]}" $((16 + RANDOM % 3 * 8)) || true ;;
      2) [[ $v == base-* || -n ${pod_of[$v]:-} ]] && continue
         call delete volume delete "$v" >/dev/null && { unset "size[$v]"; forget "$v"; } ;;
      3) s=$((size[$v] + 16))
         call expand volume expand "$v" --size "${s}Mi" >/dev/null && size[$v]=$s ;;
      4) [[ -n ${pod_of[$v]:-} ]] && continue
         publish_volume "pod-$i" "$v" || true ;;
      5) [[ $v == base-* || -z ${pod_of[$v]:-} ]] && continue
         call unpublish unpublish --target "$(target_of "${pod_of[$v]}")" >/dev/null && unset "pod_of[$v]" ;;
      6) [[ ${pool_of[$v]} == thick || ${pool_of[$v]} == nfs ]] && continue  # snapshots: thin and dir pools
         call snapcreate snapshot create "s-$i" --volume "$v" >/dev/null &&
           { snaps+=("s-$i"); snap_size[s-$i]=${size[$v]}; snap_pool[s-$i]=${pool_of[$v]}; } ;;
      7) ((${#snaps[@]})) || continue
         s=${snaps[RANDOM % ${#snaps[@]}]}
         call snapdelete snapshot delete "$s" >/dev/null && {
           kept=()
           for x in "${snaps[@]}"; do [[ $x == "$s" ]] || kept+=("$x"); done
           snaps=("${kept[@]}")
         } ;;
      8) ((${#snaps[@]})) || continue
         s=${snaps[RANDOM % ${#snaps[@]}]}
         make_volume "r-$i" "${snap_pool[$s]}" "${snap_size[$s]}" --from-snapshot "$s" || true ;;
    esac
  done
  sleep 60
  vm_fail "the power was not cut"
fi

[[ $phase == after ]] || vm_fail "phase must be before or after, not $phase"
log=${POWER_OUT:?}/ops
[[ -s $log ]] || vm_fail "boot 1 left no log of its operations"
mkdir -p $persist
vm_run mount -t ext4 "$(vm_disk persist)" $persist
rm -f "$VM_SANDBOX/nodevold.sock"  # a socket file outlives its server
nfs_server_start $persist/nfs  # the share is back before nodevold starts

# What the log says, from the calls that ended: volumes created (not
# deleted since), their last size, which pod has each, the markers
# written; and the call in flight.
declare -A want_size=() want_pool=() marker=() pod_of=() want_snap=() also_size=()
pod_in() { local p=${1#"$VM_PODS/"}; echo "${p%%/*}"; }
inflight=""
done_ops=0
while read -r kind rc op a1 a2 a3 a4 a5 a6 a7 a8 a9; do
  case $kind in
    start) inflight="$rc $op $a1 $a2 $a3 $a4 $a5 $a6 $a7 $a8 $a9"; continue ;;
    marker) marker[$rc]="$op $a1 $a2 $a3 $a4 $a5"; marker[$rc]=${marker[$rc]%"${marker[$rc]##*[! ]}"}; continue ;;
    done) inflight=""; done_ops=$((done_ops + 1)) ;;
    *) continue ;;
  esac
  if [[ $rc != rc=0 ]]; then
    # A failed expand may have grown the volume or not: either size is right.
    [[ $op == expand ]] && also_size[$a3]=${a5%Mi}
    continue
  fi
  case $op in
    create) want_size[$a3]=${a7%Mi}; want_pool[$a3]=$a5 ;;                 # volume create V --pool P --size S
    delete) unset "want_size[$a3]" "want_pool[$a3]" ;;                     # volume delete V
    expand) want_size[$a3]=${a5%Mi}; unset "also_size[$a3]" ;;              # volume expand V --size S
    publish) pod_of[$a5]=$(pod_in "$a3") ;;                                 # publish --target T --volume V
    unpublish) for v in "${!pod_of[@]}"; do [[ ${pod_of[$v]} == "$(pod_in "$a3")" ]] && unset "pod_of[$v]"; done ;;
    snapcreate) want_snap[$a3]=1 ;;                                         # snapshot create S --volume V
    snapdelete) unset "want_snap[$a3]" ;;                                   # snapshot delete S
  esac
done <"$log"
inflight=${inflight%"${inflight##*[! ]}"}
vm_step "boot 2: $done_ops calls had ended before the cut; in flight: ${inflight:-nothing}"

vm_nodevold_start "${pools[@]}"
vm_log "drift: $(vm_ctl info 2>&1 | sed -n '/Drift/,$p' | tr '\n' ' ')"

declare -A listed
while read -r name pool backend size unit state rest; do
  [[ $name == NAME ]] && continue
  listed[$name]=$state
done < <(vm_ctl volume list | sed 's/MiB/ MiB/')
read -r -a fly <<<"$inflight"
fly_op=${fly[0]:-} fly_vol=""
fly_snap=""
case $fly_op in
  create | delete | expand) fly_vol=${fly[3]} ;;
  publish) fly_vol=${fly[5]} ;;
  snapcreate | snapdelete) fly_snap=${fly[3]} ;;
esac

vm_step "every volume whose create ended is there; nothing else but the one in flight"
# tagged_lvs KIND: the names in VG nv's nodevol.io/KIND=NAME tags.
tagged_lvs() {
  lvm lvs --noheadings -o lv_tags nv 2>/dev/null |
    awk -v t="nodevol.io/$1=" '{n = split($1, tags, ","); for (i = 1; i <= n; i++) if (index(tags[i], t) == 1) print substr(tags[i], length(t) + 1)}'
}
# expect_ended KIND WANT LISTED IN_FLIGHT DELETE_OP: every KIND (volume,
# snapshot) in the array named WANT is READY in the one named LISTED, but
# the one in flight if its delete was; none listed that no create ended
# but the one in flight; no LV tagged with a KIND that is not listed.
expect_ended() {
  local kind=$1 fly_name=$4 delete_op=$5 n
  local -n want_=$2 listed_=$3
  for n in "${!want_[@]}"; do
    [[ $n == "$fly_name" && $fly_op == "$delete_op" ]] && continue
    [[ ${listed_[$n]:-} == READY ]] || vm_fail "$kind $n (created before the cut) is ${listed_[$n]:-not listed}"
  done
  for n in "${!listed_[@]}"; do
    [[ -n ${want_[$n]:-} || $n == "$fly_name" ]] ||
      vm_fail "$kind $n is listed (${listed_[$n]}) but no create of it ended, and it was not in flight"
  done
  for n in $(tagged_lvs "$kind"); do [[ -n ${listed_[$n]:-} ]] || vm_fail "orphan LV of $kind $n"; done
}
expect_ended volume want_size listed "$fly_vol" delete
for d in "$persist"/pool/*; do
  [[ -e $d ]] || continue
  [[ -n ${listed[${d##*/}]:-} ]] || vm_fail "orphan directory $d in the dir pool"
done
# The NFS pool: a subdirectory ops-NAME-NAME and a shared record (what
# other nodes publish from) for each listed volume, nothing else.
for d in "$persist"/nfs/ops-*; do
  [[ -e $d ]] || continue
  n=${d##*/ops-} && n=${n:0:(${#n} - 1) / 2}  # ops-NAME-NAME
  [[ -n ${listed[$n]:-} ]] || vm_fail "orphan directory $d on the NFS export"
done
for r in "$persist"/nfs/.nodevol/volumes/*.json; do
  [[ -e $r ]] || continue
  n=$(basename "$r" .json)
  [[ -n ${listed[$n]:-} ]] || vm_fail "the NFS export keeps a record of $n, which nodevold does not list"
done
for v in "${!want_pool[@]}"; do
  [[ ${want_pool[$v]} == nfs && ${listed[$v]:-} == READY ]] || continue
  [[ -d $persist/nfs/ops-$v-$v && -f $persist/nfs/.nodevol/volumes/$v.json ]] ||
    vm_fail "NFS volume $v: no subdirectory or no shared record on the export"
done
declare -A listed_snap=()
while read -r name volume pool size state rest; do
  [[ $name == NAME ]] && continue
  listed_snap[$name]=$state
done < <(vm_ctl snapshot list)
expect_ended snapshot want_snap listed_snap "$fly_snap" snapdelete
per_pool=$(for p in "${pool_names[@]}"; do
  n=0
  for v in "${!want_pool[@]}"; do [[ ${want_pool[$v]} == "$p" ]] && n=$((n + 1)); done
  printf '%s %s, ' "$p" "$n"
done)
vm_log "${#want_size[@]} volumes expected (${per_pool%, }), ${#listed[@]} listed; ${#want_snap[@]} snapshots expected, ${#listed_snap[@]} listed"

vm_step "the call in flight made again: ${inflight:-none}"
if [[ -n $inflight ]]; then
  # kubelet makes a publish's target directory before each call; the one
  # made before the cut was not synced and may be gone with it.
  [[ $fly_op == publish ]] && mkdir -p "${fly[3]}"
  out=$(vm_ctl "${fly[@]:1}" 2>&1) || vm_fail "retrying '${fly[*]:1}' after the power loss: $out"
  case $fly_op in
    create) want_size[$fly_vol]=${fly[7]%Mi}; want_pool[$fly_vol]=${fly[5]} ;;
    delete) unset "want_size[$fly_vol]" "want_pool[$fly_vol]" ;;
    expand) want_size[$fly_vol]=${fly[5]%Mi}; unset "also_size[$fly_vol]" ;;
    publish) pod=${fly[3]#"$VM_PODS/"}; pod_of[$fly_vol]=${pod%%/*} ;;
    unpublish) for v in "${!pod_of[@]}"; do [[ $(target_of "${pod_of[$v]}") == "${fly[3]}" ]] && unset "pod_of[$v]"; done ;;
    snapcreate) want_snap[$fly_snap]=1 ;;
    snapdelete) unset "want_snap[$fly_snap]" ;;
  esac
fi

# size_ok V BYTES: BYTES is V's last ended size (or a failed expand's).
size_ok() {
  (($2 == want_size[$1] * MiB)) || { [[ -n ${also_size[$1]:-} ]] && (($2 == also_size[$1] * MiB)); }
}
# lv_of V: "BYTES DM_PATH" of the LV tagged nodevol.io/volume=V.
lv_of() {
  lvm lvs --noheadings --units b --nosuffix -o lv_size,lv_dm_path,lv_tags nv 2>/dev/null |
    awk -v t="nodevol.io/volume=$1" '{n = split($3, tags, ","); for (i = 1; i <= n; i++) if (tags[i] == t) print $1 + 0, $2}'
}
# fs_bytes TARGET DEVICE: the size of the filesystem mounted at TARGET, from
# its own superblock (statfs leaves out ext4's overhead).
fs_bytes() {
  case $(stat -f -c %T "$1") in
    xfs) xfs_info "$1" | sed -n 's/^data *= *bsize=\([0-9]*\) *blocks=\([0-9]*\).*/\1 \2/p' | awk '{print $1 * $2}' ;;
    *) dumpe2fs -h "$2" 2>/dev/null | awk -F: '/^Block count/ {c = $2} /^Block size/ {b = $2} END {print c * b}' ;;
  esac
}

vm_step "every volume's size is its last ended create or expand: its record; an LVM volume's LV and filesystem too"
sizes=0
for v in "${!want_size[@]}"; do
  got=$(vm_json_get "$(vm_ctl -o json volume get "$v")" size_bytes)
  size_ok "$v" "${got:-0}" || vm_fail "volume $v: its record says ${got:-nothing} bytes, its last ended create or expand asked ${want_size[$v]} MiB"
  sizes=$((sizes + 1))
done
vm_log "$sizes records at their last size"

vm_step "kubelet replays every publication; each volume's marker and size"
for v in "${!want_size[@]}"; do
  pod=${pod_of[$v]:-check-$v}
  t=$(target_of "$pod")
  mkdir -p "$t"
  out=$(vm_ctl publish --target "$t" --volume "$v" 2>&1) || vm_fail "publish $v at $t after the power loss: $out"
  if [[ -n ${marker[$v]:-} ]]; then
    [[ $(cat "$t/marker" 2>&1) == "${marker[$v]}" ]] || vm_fail "volume $v: its synced marker is lost: '$(cat "$t/marker" 2>&1)'"
  fi
  if [[ ${want_pool[$v]} == thick || ${want_pool[$v]} == thin ]]; then
    # The LV is the size asked (whole extents: every size here is a
    # multiple of 8 MiB), and the filesystem fills it, within a MiB (xfs
    # leaves out a last allocation group that small); an expand adds
    # 16 MiB, so a lost lvextend or resize fails one of the two.
    read -r lv_b dev <<<"$(lv_of "$v")"
    size_ok "$v" "${lv_b:-0}" || vm_fail "volume $v: its LV has ${lv_b:-no} bytes, its last ended create or expand asked ${want_size[$v]} MiB"
    fs_b=$(fs_bytes "$t" "$dev")
    ((fs_b <= lv_b && fs_b > lv_b - MiB)) || vm_fail "volume $v: its filesystem has ${fs_b:-?} bytes in an LV of $lv_b"
    lvm_checked=$((${lvm_checked:-0} + 1))
  fi
  [[ -n ${pod_of[$v]:-} ]] || vm_run vm_ctl unpublish --target "$t" >/dev/null
done
vm_log "markers read back: $(for v in "${!marker[@]}"; do [[ -n ${want_size[$v]:-} ]] && echo x; done | wc -l); LVs and filesystems at their size: ${lvm_checked:-0}"

vm_step "everything torn down; nothing left"
for v in "${!pod_of[@]}"; do
  [[ -n ${want_size[$v]:-} ]] && vm_run vm_ctl unpublish --target "$(target_of "${pod_of[$v]}")" >/dev/null
done
for s in $(vm_ctl snapshot list | awk 'NR > 1 {print $1}'); do vm_run vm_ctl snapshot delete "$s" >/dev/null; done
for v in $(vm_ctl volume list | awk 'NR > 1 {print $1}'); do vm_run vm_ctl volume delete "$v" >/dev/null; done
[[ -z $(tagged_lvs snapshot) ]] || vm_fail "snapshot LVs left: $(tagged_lvs snapshot | xargs)"
[[ -z $(vm_ctl volume list | awk 'NR > 1') ]] || vm_fail "volumes left: $(vm_ctl volume list)"
[[ -z $(tagged_lvs volume) ]] || vm_fail "LVs left: $(tagged_lvs volume | xargs)"
# The pool's snapshot area stays, empty.
[[ -z $(ls -A $persist/pool | grep -vx .snapshots) && -z $(ls -A $persist/pool/.snapshots 2>/dev/null) ]] ||
  vm_fail "dir pool not empty: $(ls -A $persist/pool $persist/pool/.snapshots 2>&1)"
left=$(nfs_export_leftovers)
[[ -z $left ]] || vm_fail "left on the NFS export: $left"
! grep -q " $VM_PODS/" /proc/self/mountinfo || vm_fail "mounts left: $(grep " $VM_PODS/" /proc/self/mountinfo)"
vm_nodevold_stop
echo "power loss during operations: OK ($done_ops calls ended before the cut; in flight: ${inflight:-nothing})"
