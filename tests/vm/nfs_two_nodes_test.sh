#!/bin/bash
# Runs inside a vm-run guest (tests/vm/CMakeLists.txt): one NFS pool served
# by two nodes (issue 26 item 5). Two nodevolds in one guest, each with its
# own socket, state dir and pods root and the same pool on the guest's
# nfsd, stand for two nodes of a cluster; pods mount through
# nodevol-flex with a PV's options, as kubelet calls it.
#  1. a volume made on node a (its record is on the export too) is
#     published on node b; a pod on each node writes, each reads the
#     other's file; node b keeps a copy of the record only while it
#     publishes the volume.
#  2. a pod of another namespace on node b, naming the volume in options
#     its author wrote, gets nothing, and nothing is written on node b.
#  3. records on the export that nodevold must not trust (another export,
#     not JSON, another pool) are refused; nothing is mounted.
#  4. node a stopped: node b expands and deletes the volume when the pool
#     is named; the directory and the record go. Node a started again:
#     deleting its stale record there removes nothing else.
#  5. a volume whose record is not on the export (made before there were
#     shared records): its next stage on node a writes it, node b then
#     publishes it.
# Needs NODEVOLD, NODEVOLCTL and NODEVOL_FLEX.
source "$VM_LIB"
source "$(dirname "$0")/nfs_lib.sh"
: "${NODEVOL_FLEX:?NODEVOL_FLEX must name the nodevol-flex binary}"

vm_step "NFS server: tmpfs export on loopback"
nfs_server_start 64m
pool="--pool=name=shared,backend=nfs,server=127.0.0.1,share=/,mount-options=vers=4.2 hard"
REC=$NFS_EXPORT/.nodevol/volumes

# node_start ID: a nodevold standing for node ID, sandbox /run/nodevol-ID.
declare -A SOCK PODS STATE PID
node_start() {
  VM_SANDBOX=/run/nodevol-$1 vm_nodevold_start "$pool"
  SOCK[$1]=$VM_SOCKET PODS[$1]=$VM_PODS STATE[$1]=$VM_STATE PID[$1]=$VM_NODEVOLD_PID
}
node_stop() {
  kill -TERM "${PID[$1]}"
  wait "${PID[$1]}" || vm_fail "node $1's nodevold exited $? on SIGTERM"
}
on() { # on ID nodevolctl-args...
  local id=$1
  shift
  VM_SOCKET=${SOCK[$id]} vm_ctl "$@"
}
target() { # target ID POD: a pod volume directory on node ID
  local t=${PODS[$1]}/$2/volumes/nodevol.io~volume/data
  mkdir -p "$t"
  echo "$t"
}
# flex ID mount|unmount TARGET [NAMESPACE [OPTIONS-JSON-TAIL]]: kubelet's call on node ID.
flex() {
  local id=$1 op=$2 t=$3 ns=${4:-team} extra=${5:-'"volume":"pvc-1","pool":"shared"'}
  if [[ $op == mount ]]; then
    NODEVOL_FLEX_SOCKET=${SOCK[$id]} "$NODEVOL_FLEX" mount "$t" \
      '{"kubernetes.io/fsType":"","kubernetes.io/readwrite":"rw","kubernetes.io/pod.namespace":"'"$ns"'","kubernetes.io/pod.name":"p","kubernetes.io/pod.uid":"'"$(basename "$(dirname "$(dirname "$(dirname "$t")")")")"'","kubernetes.io/pvOrVolumeName":"data",'"$extra"'}'
  else
    NODEVOL_FLEX_SOCKET=${SOCK[$id]} "$NODEVOL_FLEX" unmount "$t"
  fi
}
success() { grep -q '"status": *"Success"' <<<"$1"; }
# mount_ok ID TARGET [NS [OPTIONS]]: the mount succeeds. mount_refused: it
# fails; prints the driver's answer.
mount_ok() {
  local out
  out=$(flex "$1" mount "${@:2}") || true
  success "$out" || vm_fail "mount on node $1 of $2 failed: $out"
}
mount_refused() {
  local out
  out=$(flex "$1" mount "${@:2}") || true
  ! success "$out" || vm_fail "mount on node $1 of $2 succeeded (${*:3})" >&2
  echo "$out"
}
unmount_ok() {
  local out
  out=$(flex "$1" unmount "$2") || true
  success "$out" || vm_fail "unmount on node $1 of $2 failed: $out"
}
volumes_on() { on "$1" -o json volume list | grep -o '"name": *"[^"]*"' | sed 's/.*"\([^"]*\)"$/\1/' | sort | tr '\n' ' '; }

vm_step "two nodes, one NFS pool"
node_start a
node_start b

vm_step "1. a volume made on node a is published on node b; pods on both nodes share it"
vm_run on a volume create pvc-1 --pool shared --size 10Mi --param nodevol.io/pvc-namespace=team \
  --param nodevol.io/pvc-name=data --param nodevol.io/pv-name=pvc-1
dir=$NFS_EXPORT/team-data-pvc-1
[[ -d $dir ]] || vm_fail "no directory for pvc-1 on the server"
[[ -f $REC/pvc-1.json ]] || vm_fail "node a wrote no record on the export: $(ls -la "$REC" 2>&1)"
[[ $(stat -c %a "$NFS_EXPORT/.nodevol") == 700 ]] || vm_fail ".nodevol is $(stat -c %a "$NFS_EXPORT/.nodevol"), not 700"
grep -q '"pvc-namespace": *"team"\|"nodevol.io/pvc-namespace": *"team"' "$REC/pvc-1.json" || vm_fail "record: $(cat "$REC/pvc-1.json")"
[[ -z $(volumes_on b) ]] || vm_fail "node b knows volumes before any publish: $(volumes_on b)"
# The same name for another claim on node b (issue 69 item 9: node b
# adopted the directory and overwrote the record, and a delete through
# either node removed the other's data): refused, nothing changed.
rec_before=$(cat "$REC/pvc-1.json")
out=$(on b volume create pvc-1 --pool shared --size 10Mi --param nodevol.io/pvc-namespace=intruder \
  --param nodevol.io/pvc-name=data --param nodevol.io/pv-name=pvc-1 2>&1) && vm_fail "node b made a second pvc-1: $out"
grep -q "already exists on 127.0.0.1:/, made for claim team/data" <<<"$out" || vm_fail "unexpected refusal: $out"
[[ $(cat "$REC/pvc-1.json") == "$rec_before" && ! -e $NFS_EXPORT/intruder-data-pvc-1 ]] ||
  vm_fail "the refused create changed the export: $(ls "$NFS_EXPORT"); $(cat "$REC/pvc-1.json")"
[[ -z $(volumes_on b) ]] || vm_fail "the refused create left a volume on node b: $(volumes_on b)"
ta=$(target a pod-a) tb=$(target b pod-b) tb2=$(target b pod-b2)
mount_ok a "$ta"
mount_ok b "$tb"
mount_ok b "$tb2"
echo "from a" >"$ta/a.txt"
echo "from b" >"$tb/b.txt"
[[ $(cat "$tb/a.txt") == "from a" ]] || vm_fail "node b does not read node a's file"
[[ $(cat "$ta/b.txt") == "from b" ]] || vm_fail "node a does not read node b's file"
[[ $(cat "$dir/b.txt") == "from b" ]] || vm_fail "node b's write is not in the volume's directory"
[[ $(volumes_on b) == "pvc-1 " ]] || vm_fail "node b's volumes: $(volumes_on b)"
[[ -f ${STATE[b]}/volumes/pvc-1.json ]] || vm_fail "node b keeps no durable copy while it publishes"
grep -q '"shared_copy": *true' "${STATE[b]}/volumes/pvc-1.json" || vm_fail "node b's record is no copy"
unmount_ok b "$tb"
[[ -f ${STATE[b]}/volumes/pvc-1.json ]] || vm_fail "node b dropped its copy while pod-b2 still has the volume"
unmount_ok b "$tb2"
[[ ! -e ${STATE[b]}/volumes/pvc-1.json && -z $(volumes_on b) ]] || vm_fail "node b kept its copy: $(volumes_on b)"
[[ -z $(nfs_mounts_below "${STATE[b]}/nfs/volumes") ]] || vm_fail "node b left a bind: $(nfs_mounts_below "${STATE[b]}/nfs")"
[[ -d $dir && -f $REC/pvc-1.json ]] || vm_fail "node b's unmount touched the volume or its record"
mountpoint -q "$ta" || vm_fail "node a's pod lost its mount"

vm_step "2. a pod of another namespace on node b gets nothing"
tx=$(target b pod-x)
out=$(mount_refused b "$tx" intruder)
grep -q "another namespace" <<<"$out" || vm_fail "unexpected refusal: $out"
mount_refused b "$tx" intruder '"volume":"pvc-1"' >/dev/null
! mountpoint -q "$tx" || vm_fail "$tx is mounted"
[[ -z $(volumes_on b) && -z $(ls "${STATE[b]}/volumes") ]] || vm_fail "the refused pod left a record on node b"

vm_step "3. records on the export that nodevold must not trust"
printf '%s\n' '{"format": 1, "name": "pvc-evil", "pool": "shared", "size_bytes": 1, "fs_type": "",' \
  '"parameters": {"nodevol.io/pvc-namespace": "team"}, "backend": "nfs", "state": "ready", "ephemeral": false,' \
  '"created_unix": 0, "attributes": {"kind": "export", "server": "127.0.0.2", "share": "/", "mount_options": "",' \
  '"on_delete": "retain", "path": "/x"}}' >"$REC/pvc-evil.json"
out=$(mount_refused b "$(target b pod-e)" team '"volume":"pvc-evil","pool":"shared"')
grep -q "not of a directory of this export" <<<"$out" || vm_fail "unexpected refusal: $out"
sed 's/"pool": "shared"/"pool": "other"/; s/"kind": "export"/"kind": "subdir", "subdir": "team-data-pvc-1"/; s/127.0.0.2/127.0.0.1/' \
  "$REC/pvc-evil.json" >"$REC/pvc-other.json"
sed -i 's/"pvc-evil"/"pvc-other"/' "$REC/pvc-other.json"
out=$(mount_refused b "$(target b pod-o)" team '"volume":"pvc-other","pool":"shared"')
grep -q "belongs to another pool" <<<"$out" || vm_fail "unexpected refusal: $out"
echo "not json" >"$REC/pvc-junk.json"
out=$(mount_refused b "$(target b pod-j)" team '"volume":"pvc-junk","pool":"shared"')
grep -q "cannot be used" <<<"$out" || vm_fail "unexpected refusal: $out"
# A record of a directory of this very export whose mount options turn
# the pool's hard into soft (issue 69 item 4): the pool's options decide.
sed 's/"pvc-1"/"pvc-soft"/; s/"mount_options": *"[^"]*"/"mount_options": "soft,vers=4.2"/' "$REC/pvc-1.json" >"$REC/pvc-soft.json"
grep -q '"mount_options": "soft,vers=4.2"' "$REC/pvc-soft.json" || vm_fail "no forged options in $(cat "$REC/pvc-soft.json")"
out=$(mount_refused b "$(target b pod-s)" team '"volume":"pvc-soft","pool":"shared"')
grep -q "hard is the pool's to decide" <<<"$out" || vm_fail "unexpected refusal: $out"
[[ -z $(nfs_mounts_below "${PODS[b]}") && -z $(volumes_on b) ]] || vm_fail "a refused record left a mount or a copy"
rm -f "$REC/pvc-evil.json" "$REC/pvc-other.json" "$REC/pvc-junk.json" "$REC/pvc-soft.json"

vm_step "4. node a stopped: node b expands and deletes the volume when the pool is named"
unmount_ok a "$ta"
node_stop a
on b volume get pvc-1 >/dev/null 2>&1 && vm_fail "node b answers for pvc-1 without the pool named"
vm_run on b volume get pvc-1 --shared-pool shared
vm_run on b volume expand pvc-1 --size 20Mi --shared-pool shared
grep -q '"size_bytes": *20971520' "$REC/pvc-1.json" || vm_fail "the expansion is not in the record: $(cat "$REC/pvc-1.json")"
out=$(on b volume delete pvc-1)
[[ $out == *"did not exist"* && -d $dir ]] || vm_fail "a delete without the pool named: $out"
out=$(on b volume delete pvc-1 --shared-pool shared)
[[ $out == *deleted* ]] || vm_fail "delete on node b: $out"
[[ ! -e $dir && ! -e $REC/pvc-1.json ]] || vm_fail "the directory or the record stayed: $(ls -la "$NFS_EXPORT" "$REC")"
[[ -z $(ls "${STATE[b]}/volumes") ]] || vm_fail "node b kept a record of the deleted volume"
vm_step "   node a back: its stale record deleted, nothing else touched"
echo keep >"$NFS_EXPORT/keep.txt"
node_start a
[[ $(volumes_on a) == "pvc-1 " ]] || vm_fail "node a's volumes: $(volumes_on a)"
vm_run on a volume delete pvc-1
[[ -z $(volumes_on a) && -f $NFS_EXPORT/keep.txt ]] || vm_fail "after node a's delete: $(volumes_on a); $(ls "$NFS_EXPORT")"

vm_step "5. a volume without a record on the export gets one at its next stage on node a"
vm_run on a volume create pvc-2 --pool shared --size 10Mi --param nodevol.io/pvc-namespace=team \
  --param nodevol.io/pvc-name=two --param nodevol.io/pv-name=pvc-2
rm "$REC/pvc-2.json"
node_stop a
node_start a  # a new process: it has not checked pvc-2's record yet
t2=$(target b pod-2)
mount_refused b "$t2" team '"volume":"pvc-2","pool":"shared"' >/dev/null
ta2=$(target a pod-2)
mount_ok a "$ta2" team '"volume":"pvc-2","pool":"shared"'
[[ -f $REC/pvc-2.json ]] || vm_fail "node a's stage did not write the record"
mount_ok b "$t2" team '"volume":"pvc-2","pool":"shared"'
unmount_ok a "$ta2"
unmount_ok b "$t2"
vm_run on a volume delete pvc-2
[[ ! -e $NFS_EXPORT/team-two-pvc-2 && ! -e $REC/pvc-2.json ]] || vm_fail "pvc-2 stayed: $(ls -la "$NFS_EXPORT" "$REC")"
node_stop a
node_stop b
for id in a b; do
  left=$(nfs_mounts_below "${PODS[$id]}"; nfs_mounts_below "${STATE[$id]}/nfs/volumes")
  [[ -z $left ]] || vm_fail "node $id left binds: $left"
done
vm_step "PASS"
