#!/bin/bash
# Runs inside a vm-run guest (vm_lvm_snapshot): snapshots, restores and
# clones of an LVM thin pool through the real nodevold and nodevolctl.
#   lvm_snapshot_test.sh          disks: "lvm1" (>= 2G)
# Checked: data written, snapshot taken while published, more written: a
# volume restored from the snapshot (bigger than the source, its
# filesystem grown) holds the data as of the snapshot, a clone holds the
# source's data now; snapshots are thin LVs with activation skipped and
# nodevold's tags; idempotency by name; xfs restores mount beside their
# source (nouuid); the source deleted while its snapshot exists, and the
# snapshot deleted while a volume made from it exists: both allowed, data
# kept; refusals that change nothing (unknown volume or snapshot, smaller
# than the snapshot, another pool, a thick pool, a name taken by another
# source, block/filesystem mismatch, a full pool); a kill -9 right after
# lvcreate of a snapshot (its record "creating") finished by a retry and
# by a delete; records and LVs all gone at the end.
# Needs NODEVOLD and NODEVOLCTL in the environment.
source "$VM_LIB"
export DM_DISABLE_UDEV=1  # for the lvm commands this script runs itself
lvs_nv() { lvm lvs --noheadings -o lv_name nv | tr -d ' ' | sort | tr '\n' ' '; }
lv_attr() { lvm lvs --noheadings -o lv_attr "nv/$1" | tr -d ' '; }
lv_tags() { lvm lvs --noheadings -o lv_tags "nv/$1" | tr -d ' '; }
count_lvs() { lvm lvs --noheadings -o lv_name nv | grep -c "$1" || true; }

disk=$(vm_disk lvm1)
pools=("--pool=name=thick,backend=lvm,vg=nv,type=thick,devices=$disk"
       "--pool=name=thin,backend=lvm,vg=nv,type=thin,thinpool=tp,thinpool-size=50%,overprovision=3")
vm_step "nodevold: thick pool and thin pool (nv/tp, 50%, overprovision 3) on VG nv from $disk"
vm_nodevold_start "${pools[@]}"

vm_step "volume src (64 MiB, ext4) published; first data written"
vm_run vm_ctl volume create src --pool thin --size 64Mi
t=$(vm_target pod-a src)
vm_run vm_ctl publish --volume src --target "$t"
echo one >"$t/f"
dd if=/dev/urandom of="$t/blob" bs=1M count=8 status=none
sync
blobsum=$(md5sum <"$t/blob")

vm_step "snapshot s1 of src while published; then src changes"
vm_run vm_ctl snapshot create s1 --volume src
vm_run vm_ctl snapshot create s1 --volume src  # idempotent
[[ $(lv_attr nvs-s1) == V*k ]] || vm_fail "nvs-s1 is not a thin LV with activation skipped: $(lv_attr nvs-s1)"
[[ $(lv_attr nvs-s1) == ????-* ]] || vm_fail "nvs-s1 is active: $(lv_attr nvs-s1)"
tags=$(lv_tags nvs-s1)
[[ $tags == *nodevol.io/managed* && $tags == *nodevol.io/snapshot=s1* && $tags == *nodevol.io/pool=thin* &&
   $tags != *nodevol.io/volume=* ]] || vm_fail "nvs-s1 tags: $tags"
vm_ctl -o json snapshot get s1 | grep -q '"size_bytes": "67108864"' || vm_fail "snapshot get: $(vm_ctl -o json snapshot get s1)"
vm_ctl snapshot list --volume src | grep -q '^s1 ' || vm_fail "snapshot list lacks s1: $(vm_ctl snapshot list)"
[[ $(vm_json_get "$(vm_ctl -o json capacity thin)" snapshot_count) == 1 ]] ||
  vm_fail "capacity of pool thin does not count s1: $(vm_ctl -o json capacity thin)"
echo two >"$t/f"
rm "$t/blob"
sync

vm_step "restore r1 (96 MiB) from s1: the data as of the snapshot, the filesystem grown"
vm_run vm_ctl volume create r1 --pool thin --size 96Mi --from-snapshot s1
vm_run vm_ctl volume create r1 --pool thin --size 96Mi --from-snapshot s1  # idempotent
expect_code ALREADY_EXISTS vm_ctl volume create r1 --pool thin --size 96Mi
tr=$(vm_target pod-b r1)
vm_run vm_ctl publish --volume r1 --target "$tr"
[[ $(cat "$tr/f") == one ]] || vm_fail "r1 holds '$(cat "$tr/f")', not the snapshot's 'one'"
[[ $(md5sum <"$tr/blob") == "$blobsum" ]] || vm_fail "r1's blob differs from the snapshot's"
size=$(df -B1 --output=size "$tr" | tail -1)
((size > 80 * 1024 * 1024)) || vm_fail "r1's filesystem is $size bytes: not grown to its 96 MiB LV"
echo r1-own >"$tr/g"
[[ ! -e $t/g && $(cat "$t/f") == two ]] || vm_fail "writing r1 changed src"
vm_ctl -o json volume get r1 | grep -q '"from_snapshot": "s1"' || vm_fail "volume get r1 does not say from s1"

vm_step "clone c1 of src (published): src's data now"
vm_run vm_ctl volume create c1 --pool thin --size 64Mi --from-volume src
tc=$(vm_target pod-c c1)
vm_run vm_ctl publish --volume c1 --target "$tc"
[[ $(cat "$tc/f") == two && ! -e $tc/blob ]] || vm_fail "c1 does not hold src's current data"

vm_step "refusals change nothing"
before=$(lvs_nv)
expect_code NOT_FOUND vm_ctl snapshot create s9 --volume nosuch
expect_code NOT_FOUND vm_ctl volume create r9 --pool thin --size 64Mi --from-snapshot nosuch
expect_code NOT_FOUND vm_ctl volume create r9 --pool thin --size 64Mi --from-volume nosuch
expect_code INVALID_ARGUMENT vm_ctl volume create r9 --pool thin --size 32Mi --from-snapshot s1
expect_code INVALID_ARGUMENT vm_ctl volume create r9 --pool thick --size 64Mi --from-snapshot s1
expect_code INVALID_ARGUMENT vm_ctl volume create r9 --pool thin --size 64Mi --block --from-snapshot s1
expect_code INVALID_ARGUMENT vm_ctl volume create r9 --pool thin --size 400Mi --fs-type xfs --from-snapshot s1
expect_code INVALID_ARGUMENT vm_ctl volume create r9 --pool thin --size 400Mi --fs-type xfs --from-volume src
expect_code INVALID_ARGUMENT vm_ctl snapshot create ../x --volume src
expect_code ALREADY_EXISTS vm_ctl snapshot create s1 --volume c1
vm_run vm_ctl volume create k1 --pool thick --size 32Mi
expect_code FAILED_PRECONDITION vm_ctl snapshot create sk --volume k1
expect_code RESOURCE_EXHAUSTED vm_ctl volume create r9 --pool thin --size 8Gi --from-snapshot s1
vm_run vm_ctl volume delete k1
[[ $(lvs_nv) == "$before" ]] || vm_fail "a refusal changed the LVs: $before -> $(lvs_nv)"
vm_ctl volume list | grep -q 'r9' && vm_fail "a refused create left a record: $(vm_ctl volume list)"
vm_ctl snapshot list | grep -qE '^(s9|sk|x) ' && vm_fail "a refused snapshot left a record: $(vm_ctl snapshot list)"

vm_step "a full pool: a snapshot that cannot be promised is refused, nothing made"
# Promise the pool's room away (3 x its size) with a big volume.
free=$(vm_json_get "$(vm_ctl -o json capacity thin)" free_bytes)
vm_run vm_ctl volume create hog --pool thin --size "$((free - 32 * 1024 * 1024))"
expect_code RESOURCE_EXHAUSTED vm_ctl snapshot create s-full --volume src
[[ $(count_lvs nvs-s-full) == 0 ]] || vm_fail "a refused snapshot left its LV"
vm_run vm_ctl volume delete hog

vm_step "xfs: a restore mounts beside its published source (nouuid)"
vm_run vm_ctl volume create x1 --pool thin --size 320Mi --fs-type xfs
tx=$(vm_target pod-x x1)
vm_run vm_ctl publish --volume x1 --target "$tx"
echo xfs-data >"$tx/f"
sync
vm_run vm_ctl snapshot create sx --volume x1
vm_run vm_ctl volume create rx --pool thin --size 320Mi --from-snapshot sx
trx=$(vm_target pod-y rx)
vm_run vm_ctl publish --volume rx --target "$trx"
[[ $(cat "$trx/f") == xfs-data ]] || vm_fail "the xfs restore lacks the data"
vm_run vm_ctl unpublish --target "$trx"
vm_run vm_ctl unpublish --target "$tx"
vm_run vm_ctl volume delete rx
vm_run vm_ctl volume delete x1
vm_run vm_ctl snapshot delete sx

vm_step "src deleted while s1 exists; s1 deleted while r1 (made from it) exists: data kept"
vm_run vm_ctl unpublish --target "$t"
vm_run vm_ctl volume delete src
[[ $(count_lvs nv-src) == 0 ]] || vm_fail "src's LV is still there"
vm_run vm_ctl volume create r2 --pool thin --size 64Mi --from-snapshot s1
t2=$(vm_target pod-d r2)
vm_run vm_ctl publish --volume r2 --target "$t2"
[[ $(cat "$t2/f") == one ]] || vm_fail "a restore after the source's delete lacks the data"
vm_run vm_ctl snapshot delete s1
vm_run vm_ctl snapshot delete s1  # idempotent
[[ $(count_lvs nvs-s1) == 0 ]] || vm_fail "s1's LV is still there"
[[ $(cat "$tr/f") == one && $(cat "$tr/g") == r1-own ]] || vm_fail "r1 lost data when s1 went"

vm_step "kill -9 after the snapshot's lvcreate, before its record is ready: a retry finishes it"
vm_run vm_ctl snapshot create s2 --volume c1
# Put the record back to "creating" as a kill -9 between lvcreate and the
# ready record leaves it (the LV exists, made after the record).
kill -9 "$VM_NODEVOLD_PID"; wait "$VM_NODEVOLD_PID" 2>/dev/null || true
sed -i 's/"state": "ready"/"state": "creating"/' "$VM_STATE/snapshots/s2.json"
vm_nodevold_start "${pools[@]}"
vm_ctl info | grep -q "snapshot s2 was being taken" || vm_fail "no drift line for s2: $(vm_ctl info)"
vm_ctl -o json snapshot get s2 | grep -q CREATING || vm_fail "s2 is not creating after the restart"
vm_run vm_ctl snapshot create s2 --volume c1
vm_ctl -o json snapshot get s2 | grep -q READY || vm_fail "the retry did not finish s2"
[[ $(count_lvs nvs-s2) == 1 ]] || vm_fail "s2 has $(count_lvs nvs-s2) LVs"
vm_step "the same, ended by a delete instead"
kill -9 "$VM_NODEVOLD_PID"; wait "$VM_NODEVOLD_PID" 2>/dev/null || true
sed -i 's/"state": "ready"/"state": "creating"/' "$VM_STATE/snapshots/s2.json"
vm_nodevold_start "${pools[@]}"
vm_run vm_ctl snapshot delete s2
[[ $(count_lvs nvs-s2) == 0 ]] || vm_fail "the delete of a creating s2 left its LV"

vm_step "everything deleted: no LV, no record, no mount left"
for p in "$tr" "$tc" "$t2"; do vm_run vm_ctl unpublish --target "$p"; done
for v in r1 c1 r2; do vm_run vm_ctl volume delete "$v"; done
[[ $(lvs_nv) == "tp " ]] || vm_fail "LVs left: $(lvs_nv)"
[[ -z $(find "$VM_STATE/snapshots" "$VM_STATE/volumes" -type f) ]] || vm_fail "records left: $(find "$VM_STATE" -type f)"
! grep -q " $VM_STATE/" /proc/self/mountinfo || vm_fail "a staging mount is left: $(grep " $VM_STATE/" /proc/self/mountinfo)"
vm_step "PASS"
