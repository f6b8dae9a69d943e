#!/bin/bash
# Runs inside a vm-run guest (tests/vm/CMakeLists.txt): NFS volumes through
# the real nodevold and nodevolctl against the kernel's nfsd on loopback.
# Subdirectory and whole-export volumes sharing one staging mount, path
# patterns and their refusals, onDelete, mount options in the kernel, and a
# restart that reuses the staging mount. Needs NODEVOLD and NODEVOLCTL.
source "$VM_LIB"
source "$(dirname "$0")/nfs_lib.sh"

vm_step "NFS server: tmpfs export on loopback"
nfs_server_start 64m

claim() {  # claim NS PVC PV: the parameters a provisioner passes
  echo --param nodevol.io/pvc-namespace="$1" --param nodevol.io/pvc-name="$2" --param nodevol.io/pv-name="$3"
}
tree_of() { (cd "$NFS_EXPORT" && find . | sort); }

pool="--pool=name=shared,backend=nfs,server=127.0.0.1,share=/,mount-options=vers=4.2 timeo=77 retrans=3 actimeo=1,inline=on,inline-max-size=16Mi"
vm_step "nodevold with an nfs pool (mount options vers=4.2 timeo=77 retrans=3)"
vm_nodevold_start "$pool"
info=$(vm_ctl info)
grep -q "nfs" <<<"$info" || vm_fail "info shows no nfs pool: $info"
nfs_expect_unmounted "a staging mount exists before any volume"

vm_step 'create a subdirectory volume: ${namespace}-${pvcName}-${pvName} below the export, mode 0777'
vm_run vm_ctl volume create v1 --pool shared --size 10Mi $(claim team data pv-1)
vm_run vm_ctl volume create v1 --pool shared --size 10Mi $(claim team data pv-1)  # idempotent
[[ -d $NFS_EXPORT/team-data-pv-1 ]] || vm_fail "no directory team-data-pv-1 on the server: $(tree_of)"
[[ $(stat -c %a "$NFS_EXPORT/team-data-pv-1") == 777 ]] || vm_fail "mode $(stat -c %a "$NFS_EXPORT/team-data-pv-1"), want 777"
nfs_expect_unmounted "create left the export mounted with no user"
json=$(vm_ctl -o json volume get v1)
[[ $(vm_json_get "$json" subdir) == team-data-pv-1 ]] || vm_fail "volume attributes: $json"

vm_step "create a whole-export volume on the same server, export and options"
vm_run vm_ctl volume create whole --pool shared --size 10Mi --param share=/

vm_step "publish v1 into two pods (pod-2 read-only) and the export into a third: one staging mount"
t1=$(vm_target pod-1 v1)
t2=$(vm_target pod-2 v1)
t3=$(vm_target pod-3 whole)
vm_run vm_ctl publish --volume v1 --target "$t1"
vm_run vm_ctl publish --volume v1 --target "$t2" --read-only
vm_run vm_ctl publish --volume whole --target "$t3"
staging=$(nfs_staging_mounts)
vm_log "staging: $staging"
[[ $(wc -l <<<"$staging") == 1 && -n $staging ]] || vm_fail "want exactly one staging mount, have: $(nfs_mounts_below "$VM_STATE/nfs")"
sdir=$(awk '{print $4}' <<<"$staging")
sdev=$(awk '{print $2}' <<<"$staging")
[[ $(awk '{print $6}' <<<"$staging") == 127.0.0.1:/ ]] || vm_fail "staging source: $staging"
for t in "$t1" "$t2" "$t3"; do
  m=$(nfs_mount_at "$t")
  vm_log "target: $m"
  [[ -n $m ]] || vm_fail "$t is not mounted"
  [[ $(awk '{print $2}' <<<"$m") == "$sdev" ]] || vm_fail "$t is not a bind of the staging mount ($sdev): $m"
done
[[ $(nfs_mountinfo | awk '$5 == "nfs4" && $2 == "'"$sdev"'"' | wc -l) == 6 ]] ||
  vm_fail "want 6 mounts of $sdev (staging, 2 per-volume binds, 3 targets): $(nfs_mountinfo | grep " $sdev ")"

vm_step "mount options reach the kernel"
opts=$(awk '{print $7}' <<<"$staging")
vm_log "$opts"
for o in vers=4.2 timeo=77 retrans=3 acregmin=1 acdirmax=1 hard nosuid nodev; do
  grep -q "\(^\|,\)$o\(,\|$\)" <<<"$opts" || vm_fail "staging mount lacks $o: $opts"
done

vm_step "options a shared superblock would silently drop are refused, naming the fix (issue 30 item 8)"
# timeo is not compared when the kernel looks for a superblock to share:
# without nosharecache this mount would get the staging mount's timeo=77.
expect_code FAILED_PRECONDITION vm_ctl volume create sb1 --pool shared --size 10Mi $(claim team sb pv-sb1) --param mountOptions=timeo=50
[[ $(nfs_staging_mounts | wc -l) == 1 ]] || vm_fail "the refused mount was left: $(nfs_staging_mounts)"
[[ ! -e $NFS_EXPORT/team-sb-pv-sb1 ]] || vm_fail "the refused create made its directory"
vm_ctl volume delete sb1 >/dev/null 2>&1 || true
vm_run vm_ctl volume create sb2 --pool shared --size 10Mi $(claim team sb pv-sb2) --param "mountOptions=timeo=50,nosharecache"
vm_run vm_ctl volume delete sb2
[[ $(nfs_staging_mounts | wc -l) == 1 ]] || vm_fail "want the one staging mount: $(nfs_staging_mounts)"

vm_step "data written through one target is read through the other, and on the server"
echo "hello from pod-1" >"$t1/greeting"
[[ $(cat "$t2/greeting") == "hello from pod-1" ]] || vm_fail "pod-2 does not see pod-1's file"
[[ $(cat "$NFS_EXPORT/team-data-pv-1/greeting") == "hello from pod-1" ]] || vm_fail "the server lacks the file"
[[ $(cat "$t3/team-data-pv-1/greeting") == "hello from pod-1" ]] || vm_fail "the export volume does not show v1's directory"
if touch "$t2/nope" 2>/dev/null; then vm_fail "the read-only target accepted a write"; fi
vm_log "read-only target refuses writes"
[[ ! -e $t1/team-data-pv-1 ]] || vm_fail "the subdirectory volume shows the whole export"

vm_step "pathPattern with nested directories from an annotation; provisioners' spellings"
vm_run vm_ctl volume create v2 --pool shared --size 10Mi $(claim team web pv-2) \
  --param 'pathPattern=${.PVC.namespace}/${.PVC.annotations.storage-path}' \
  --param nodevol.io/pvc-annotation.storage-path=projects/x --param mode=0750
[[ -d $NFS_EXPORT/team/projects/x ]] || vm_fail "no team/projects/x: $(tree_of)"
[[ $(stat -c %a "$NFS_EXPORT/team/projects/x") == 750 ]] || vm_fail "mode of team/projects/x: $(stat -c %a "$NFS_EXPORT/team/projects/x")"
vm_run vm_ctl volume create v3 --pool shared --size 10Mi $(claim team csi pv-3) \
  --param 'subDir=${pvc.metadata.namespace}-${pvc.metadata.name}-${pv.metadata.name}' --param onDelete=retain
[[ -d $NFS_EXPORT/team-csi-pv-3 ]] || vm_fail "no team-csi-pv-3: $(tree_of)"

vm_step "every escape is refused before anything changes on the export"
# A symlink on the server leading out of the export: openat2 must refuse it.
ln -s / "$NFS_EXPORT/out"
before=$(tree_of)
records=$(ls "$VM_STATE/volumes")
n=0
for pattern in '../x' '/etc' 'a/../../b' 'a//b' 'x/' '.' '..' '${namespace}/..' '${colour}' '${.PVC.annotations.missing}' \
  '${namespace' 'a/.nodevol-x'; do
  n=$((n + 1))
  expect_code INVALID_ARGUMENT vm_ctl volume create bad$n --pool shared --size 10Mi $(claim team bad pv-bad) --param "pathPattern=$pattern"
done
for value in '..' '../../etc' '/etc' 'a/../..' ''; do
  n=$((n + 1))
  expect_code INVALID_ARGUMENT vm_ctl volume create bad$n --pool shared --size 10Mi $(claim team bad pv-bad) \
    --param 'pathPattern=${.PVC.annotations.dir}' --param "nodevol.io/pvc-annotation.dir=$value"
done
expect_code INVALID_ARGUMENT vm_ctl volume create bad$n --pool shared --size 10Mi $(claim team bad pv-bad) --param mountOptions=vers=9
expect_code INVALID_ARGUMENT vm_ctl volume create bad$n --pool shared --size 10Mi $(claim team bad pv-bad) --param mountOptions=nolock,ro
expect_code INVALID_ARGUMENT vm_ctl volume create bad$n --pool shared --size 10Mi --param share=/ --param onDelete=delete
# Through the server's symlink: refused by the kernel walk, not by the pattern.
expect_code FAILED_PRECONDITION vm_ctl volume create viasymlink --pool shared --size 10Mi $(claim team x pv-x) --param 'pathPattern=out/tmp/escaped'
[[ ! -e /tmp/escaped ]] || vm_fail "a create followed the server's symlink out of the export"
vm_ctl volume delete viasymlink >/dev/null 2>&1 || true
[[ $(tree_of) == "$before" ]] || vm_fail "a refused create changed the export: $(diff <(echo "$before") <(tree_of))"
[[ $(ls "$VM_STATE/volumes") == "$records" ]] || vm_fail "a refused create left records: $(ls "$VM_STATE/volumes")"
rm "$NFS_EXPORT/out"

vm_step "fsGroup on an NFS volume is refused at once and changes nothing (docs/nfs.md, fsGroup)"
tg=$(vm_target pod-g v1)
before=$(stat -c '%g %a' "$NFS_EXPORT/team-data-pv-1")
expect_code FAILED_PRECONDITION vm_ctl publish --volume v1 --target "$tg" --fs-group 4242
[[ -z $(nfs_mount_at "$tg") ]] || vm_fail "the refused publish left $tg mounted"
grep -q "\"$tg\"" <<<"$(vm_ctl -o json volume get v1)" && vm_fail "the refused publish left a publication at $tg"
[[ $(stat -c '%g %a' "$NFS_EXPORT/team-data-pv-1") == "$before" ]] || vm_fail "the refused publish changed the directory: $(stat -c '%g %a' "$NFS_EXPORT/team-data-pv-1")"
# Read-only publications never get an fsGroup: those go through.
vm_run vm_ctl publish --volume v1 --target "$tg" --read-only --fs-group 4242
vm_run vm_ctl unpublish --target "$tg"

vm_step "the staging mount stays while any pod uses it and goes with the last"
vm_run vm_ctl unpublish --target "$t2"
vm_run vm_ctl unpublish --target "$t1"
[[ -n $(nfs_staging_mounts) ]] || vm_fail "staging unmounted while pod-3 still uses the export"
[[ -z $(nfs_mount_at "$VM_STATE/nfs/volumes/v1") ]] || vm_fail "v1's per-volume bind is left after its last unpublish"
vm_run vm_ctl unpublish --target "$t3"
nfs_expect_unmounted "NFS mounts left after the last unpublish"
# The capacity monitor may mount the export for a moment right after (it
# reads the export's free space on a mount of its own when none is left;
# seen once under load): wait for that one to go too.
for _ in $(seq 100); do [[ ! -e $sdir ]] && break; sleep 0.1; done
[[ ! -e $sdir ]] || vm_fail "staging dir $sdir left behind"
nfs_expect_unmounted "NFS mounts left after the capacity monitor's read"

vm_step "a restart finds the staging mount and reuses it (no second NFS mount)"
t4=$(vm_target pod-4 v2)
t5=$(vm_target pod-5 v2)
vm_run vm_ctl publish --volume v2 --target "$t4"
id1=$(nfs_staging_mounts | awk '{print $1}')
echo "before restart" >"$t4/f"
vm_nodevold_stop
[[ -n $(nfs_staging_mounts) ]] || vm_fail "stopping nodevold unmounted the export"
vm_nodevold_start "$pool"
vm_run vm_ctl publish --volume v2 --target "$t5"
[[ $(nfs_staging_mounts | wc -l) == 1 && $(nfs_staging_mounts | awk '{print $1}') == "$id1" ]] ||
  vm_fail "not the same staging mount after a restart (was mount $id1): $(nfs_staging_mounts)"
[[ $(cat "$t5/f") == "before restart" ]] || vm_fail "pod-5 does not see the data"
grep -q "reusing staging mount" "$VM_NODEVOLD_LOG" || vm_fail "nodevold did not say it reuses the staging mount"
vm_run vm_ctl unpublish --target "$t4"
vm_run vm_ctl unpublish --target "$t5"
nfs_expect_unmounted "NFS mounts left"

vm_step "an unpublish cut short after its record went (kill -9 there): the restart unbinds and unstages"
# The state a kill leaves between the publication record's removal and the
# unstage, made by hand (vm_nfs_crash lands there only now and then).
vm_run vm_ctl publish --volume v2 --target "$t4"
vm_nodevold_stop
umount "$t4"
rm "$VM_STATE/publications/$(printf %s "$t4" | sha256sum | cut -d' ' -f1).json"
[[ -n $(nfs_mount_at "$VM_STATE/nfs/volumes/v2") ]] || vm_fail "v2's bind should still be there before the restart"
vm_nodevold_start "$pool"
nfs_expect_unmounted "the restart left the bind or the staging mount of a volume no publication holds"
vm_ctl info | grep -q "v2 was staged at $VM_STATE/nfs/volumes/v2 with no publication.*unstaged" ||
  vm_fail "the unstage at start is not reported: $(vm_ctl info)"
vm_run vm_ctl publish --volume v2 --target "$t4"
[[ $(cat "$t4/f") == "before restart" ]] || vm_fail "v2 lost its data across the unstage at start"
vm_run vm_ctl unpublish --target "$t4"
nfs_expect_unmounted "NFS mounts left"

vm_step "after a reboot (every mount gone, records kept) the start re-stages and re-binds; an unused staging mount is reported"
t6=$(vm_target pod-6 v2)
vm_run vm_ctl publish --volume v2 --target "$t6"
vm_nodevold_stop
umount "$t6"
umount "$VM_STATE/nfs/volumes/v2"
for m in $(nfs_staging_mounts | awk '{print $4}'); do umount "$m"; done
nfs_expect_unmounted "mounts left after the simulated reboot"
stray=$VM_STATE/nfs/0123456789abcdef
mkdir -p "$stray"
mount.nfs 127.0.0.1:/ "$stray" -o vers=4.2
vm_nodevold_start "$pool"
[[ $(cat "$t6/f") == "before restart" ]] || vm_fail "the re-created bind does not show v2: $(ls -la "$t6")"
[[ $(nfs_dev_of "$t6") == $(nfs_dev_of "$VM_STATE/nfs/volumes/v2") ]] || vm_fail "$t6 is not a bind of v2's staging"
info=$(vm_ctl info)
grep -q "bind mount was missing; re-created" <<<"$info" || vm_fail "info does not report the re-created bind: $info"
grep -q "staging mount $stray of 127.0.0.1:/ is used by no volume" <<<"$info" || vm_fail "info does not report the unused staging mount: $info"
vm_log "drift: $(grep -E "re-created|used by no volume" <<<"$info" | tr -s ' ' | tr '\n' ' ')"
umount "$stray"
rmdir "$stray"
vm_run vm_ctl unpublish --target "$t6"
nfs_expect_unmounted "NFS mounts left"

vm_step "an inline volume: a directory named after it, gone with its Unpublish; no backend parameters"
t7=$(vm_target pod-7 scratch)
mkdir -p "$NFS_EXPORT/victim"
echo theirs >"$NFS_EXPORT/victim/data"
chmod 0700 "$NFS_EXPORT/victim"
for p in share=/ pathPattern=victim subDir=victim server=10.9.9.9 'mountOptions=suid,dev' onDelete=retain uid=0 \
         nodevol.io/pvc-namespace=victim; do
  expect_code INVALID_ARGUMENT vm_ctl publish --inline-pool shared --inline-size 10Mi --param "$p" --target "$t7"
done
expect_code INVALID_ARGUMENT vm_ctl publish --inline-pool shared --inline-size 17Mi --target "$t7"
[[ $(stat -c %a "$NFS_EXPORT/victim") == 700 && $(cat "$NFS_EXPORT/victim/data") == theirs ]] ||
  vm_fail "the refused inline volumes touched the victim's directory: $(ls -la "$NFS_EXPORT/victim")"
vm_run vm_ctl publish --inline-pool shared --inline-size 10Mi --target "$t7"
[[ -d $NFS_EXPORT/ephemeral-pod-7-scratch ]] || vm_fail "no ephemeral-pod-7-scratch: $(tree_of)"
echo scratch >"$t7/s"
vm_run vm_ctl unpublish --target "$t7"
[[ ! -e $NFS_EXPORT/ephemeral-pod-7-scratch ]] || vm_fail "the inline volume's directory outlived its pod"
[[ $(cat "$NFS_EXPORT/victim/data") == theirs ]] || vm_fail "the victim's data changed"
rm -rf "$NFS_EXPORT/victim"
nfs_expect_unmounted "NFS mounts left"

vm_step "capacity is the export's statfs"
cap=$(vm_ctl -o json capacity shared)
total=$(vm_json_get "$cap" total_bytes) free=$(vm_json_get "$cap" free_bytes)
vm_log "capacity: total=$total free=$free"
((total == 64 * 1024 * 1024)) || vm_fail "total $total, want the 64 MiB of the exported tmpfs"
((free > 0 && free <= total)) || vm_fail "free $free"
nfs_expect_unmounted "capacity left the export mounted"

vm_step "a state dir named through a symlink, with a trailing slash: the staging mount still goes with its last user"
# The mount table shows canonical paths; nodevold resolves its state dir at
# start so that its staging mounts and binds match them (issue 30 item 7).
vm_nodevold_stop
ln -sfn "$VM_STATE" /run/state-link
"$NODEVOLD" --config="$VM_SANDBOX/nodevold.conf" --socket="$VM_SOCKET" --state-dir=/run/state-link/ \
  --pods-root="$VM_PODS" --metrics-address=off --log-target=stderr --log-level=debug "$pool" \
  </dev/null >>"$VM_NODEVOLD_LOG" 2>&1 &
VM_NODEVOLD_PID=$!
for _ in $(seq 300); do [[ -S $VM_SOCKET ]] && vm_ctl info >/dev/null 2>&1 && break; sleep 0.1; done
vm_ctl info >/dev/null || vm_fail "nodevold with --state-dir=/run/state-link/ did not start"
t8=$(vm_target pod-8 v2)
vm_run vm_ctl publish --volume v2 --target "$t8"
[[ $(cat "$t8/f") == "before restart" ]] || vm_fail "pod-8 does not see v2's data"
[[ $(nfs_staging_mounts | wc -l) == 1 ]] || vm_fail "want one staging mount: $(nfs_staging_mounts)"
vm_run vm_ctl unpublish --target "$t8"
nfs_expect_unmounted "with the state dir named through a symlink, the unpublish left NFS mounts"

vm_step "delete, retain, archive, archiveOnDelete"
vm_run vm_ctl volume delete v1  # pool default: delete
[[ ! -e $NFS_EXPORT/team-data-pv-1 ]] || vm_fail "delete left team-data-pv-1"
vm_run vm_ctl volume delete v1  # idempotent
vm_run vm_ctl volume delete v3  # onDelete=retain
[[ -d $NFS_EXPORT/team-csi-pv-3 ]] || vm_fail "retain removed team-csi-pv-3"
for i in 1 2 3; do
  vm_run vm_ctl volume create arch$i --pool shared --size 10Mi $(claim team arch pv-a) --param onDelete=archive
  echo "round $i" >"$NFS_EXPORT/team-arch-pv-a/round"
  vm_run vm_ctl volume delete arch$i
done
[[ ! -e $NFS_EXPORT/team-arch-pv-a ]] || vm_fail "archive left team-arch-pv-a"
[[ $(cat "$NFS_EXPORT/archived-team-arch-pv-a/round") == "round 1" ]] || vm_fail "no archived-team-arch-pv-a: $(tree_of)"
stamped=$(cd "$NFS_EXPORT" && ls -d archived-team-arch-pv-a-*)
vm_log "archived with time stamps: $(tr '\n' ' ' <<<"$stamped")"
[[ $(wc -l <<<"$stamped") == 2 ]] || vm_fail "want 2 stamped archives: $(tree_of)"
vm_run vm_ctl volume create old1 --pool shared --size 10Mi $(claim team old pv-o1) --param archiveOnDelete=false
vm_run vm_ctl volume create old2 --pool shared --size 10Mi $(claim team old pv-o2) --param archiveOnDelete=true
mkdir -p "$NFS_EXPORT/team-old-pv-o1/deep/er" && echo x >"$NFS_EXPORT/team-old-pv-o1/deep/er/file"
ln -s / "$NFS_EXPORT/team-old-pv-o1/deep/root-link"
vm_run vm_ctl volume delete old1
vm_run vm_ctl volume delete old2
[[ ! -e $NFS_EXPORT/team-old-pv-o1 ]] || vm_fail "archiveOnDelete=false did not delete"
[[ -d $NFS_EXPORT/archived-team-old-pv-o2 ]] || vm_fail "archiveOnDelete=true did not archive"
[[ -d /etc && -e /bin/sh ]] || vm_fail "deleting a tree with a symlink to / removed the node's files"
vm_step "a tree 500 deep with files at every level is deleted; only the volume's tombstone is ever touched"
vm_run vm_ctl volume create deep --pool shared --size 10Mi $(claim team deep pv-d)
(cd "$NFS_EXPORT/team-deep-pv-d" && for i in $(seq 500); do echo "$i" >f && mkdir d && cd d; done)
ok=0
for i in $(seq 10); do  # DEADLINE_EXCEEDED goes on at the next DeleteVolume
  if vm_ctl volume delete deep >/tmp/d.out 2>&1; then ok=1; break; fi
  grep -q DEADLINE_EXCEEDED /tmp/d.out || vm_fail "delete of the deep tree: $(cat /tmp/d.out)"
done
((ok)) || vm_fail "the deep tree is still not deleted after 10 DeleteVolume calls"
vm_log "deep tree deleted in $i DeleteVolume call(s)"
[[ ! -e $NFS_EXPORT/team-deep-pv-d ]] || vm_fail "delete left team-deep-pv-d"
[[ -z $(cd "$NFS_EXPORT" && find . -name '.nodevol-*') ]] || vm_fail "tombstones left: $(cd "$NFS_EXPORT" && find . -maxdepth 2 -name '.nodevol-*')"
vm_run vm_ctl volume delete v2
[[ ! -e $NFS_EXPORT/team/projects/x && -d $NFS_EXPORT/team/projects ]] || vm_fail "v2: want team/projects kept, x removed: $(tree_of)"
vm_run vm_ctl volume delete whole
[[ -d $NFS_EXPORT/team-csi-pv-3 ]] || vm_fail "deleting the export volume touched the export"
nfs_expect_unmounted "NFS mounts left"
vm_log "export now: $(tree_of | tr '\n' ' ')"
vm_nodevold_stop
vm_step "PASS"
