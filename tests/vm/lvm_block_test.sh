#!/bin/bash
# Runs inside a vm-run guest (vm_lvm_block): raw block volumes of a thick
# LVM pool through the real nodevold and nodevolctl (the CSI front door's
# block path, reached with publish --block).
#   lvm_block_test.sh          disks: "lvm1" (>= 512M)
# Checked: a new raw block volume reads as zeroes, also on the extents of
# a deleted volume full of data; the device bound onto a file at kubelet's
# block publish path, idempotent; refusals that change nothing (read-only,
# a filesystem's publish of it, a directory target); a kill -9 of nodevold
# keeps the bind; data survives unpublish and a publish in another pod;
# expansion while published onto zeroed extents (not a deleted volume's),
# a grow's leftover scratch LV removed at start; a thin pool that stops
# zeroing takes no raw block create or grow; nothing left behind.
# Needs NODEVOLD and NODEVOLCTL in the environment.
source "$VM_LIB"
MiB=$((1024 * 1024))
export DM_DISABLE_UDEV=1  # for the lvm commands this script runs itself
zeroes() { cmp -s -n "$2" "$1" /dev/zero; }  # DEVICE BYTES
mounts_below() { grep -c " $1/" /proc/self/mountinfo || true; }

disk=$(vm_disk lvm1)
vm_step "nodevold: thick pool on VG nv from $disk"
vm_nodevold_start "--pool=name=fast,backend=lvm,vg=nv,devices=$disk"
publish_root=$VM_SANDBOX/plugins/kubernetes.io/csi/volumeDevices/publish
block_target() { mkdir -p "$publish_root/$1"; echo "$publish_root/$1/$2"; }  # PV POD: as kubelet makes it

vm_step "a filesystem volume full of data, deleted: its extents go back to the VG"
vm_run vm_ctl volume create old --pool fast --size 64Mi
t=$(vm_target pod-0 old)
vm_run vm_ctl publish --volume old --target "$t"
dd if=/dev/urandom of="$t/blob" bs=1M count=40 status=none
sync
vm_run vm_ctl unpublish --target "$t"
vm_run vm_ctl volume delete old

vm_step "raw block volume b1 (64 MiB) on those extents: no filesystem, all zeroes"
vm_run vm_ctl volume create b1 --pool fast --size 64Mi --block
vm_run vm_ctl volume create b1 --pool fast --size 64Mi --block  # idempotent
expect_code ALREADY_EXISTS vm_ctl volume create b1 --pool fast --size 64Mi
[[ -z $(blkid -o value -s TYPE /dev/nv/nv-b1 || true) ]] || vm_fail "/dev/nv/nv-b1 carries a filesystem"
zeroes /dev/nv/nv-b1 $((64 * MiB)) || vm_fail "the new raw block volume shows old data"
vm_ctl -o json volume get b1 | grep -q '"block": true' || vm_fail "volume get does not say block: $(vm_ctl -o json volume get b1)"

vm_step "publish b1 onto a file at kubelet's block path; the pod writes through it"
t1=$(block_target pv-b1 pod-1)
vm_run vm_ctl publish --volume b1 --target "$t1" --block
vm_run vm_ctl publish --volume b1 --target "$t1" --block  # kubelet retries
# The same target asked as a filesystem: the spec's ALREADY_EXISTS (was OK).
expect_code ALREADY_EXISTS vm_ctl publish --volume b1 --target "$t1"
[[ -b $t1 ]] || vm_fail "$t1 does not show a block device"
(($(mounts_below "$publish_root") == 1)) || vm_fail "$(mounts_below "$publish_root") mounts below the publish root, want 1"
findmnt -n -o OPTIONS "$t1" | grep -qw nodev && vm_fail "the device bind is nodev: $(findmnt -n -o OPTIONS "$t1")"
findmnt -n -o OPTIONS "$t1" | grep -qw nosuid || vm_fail "the device bind is not nosuid"
dd if=/dev/urandom of=/tmp/pattern bs=1M count=8 status=none
dd if=/tmp/pattern of="$t1" bs=1M oflag=direct conv=notrunc status=none || vm_fail "writing through $t1"
sum=$(md5sum </tmp/pattern)

vm_step "refusals change nothing"
expect_code INVALID_ARGUMENT vm_ctl publish --volume b1 --target "$(block_target pv-b1 pod-ro)" --block --read-only
expect_code FAILED_PRECONDITION vm_ctl publish --volume b1 --target "$(vm_target pod-fs b1)"
expect_code INVALID_ARGUMENT vm_ctl publish --volume b1 --target "$(vm_target pod-dir b1)" --block
expect_code INVALID_ARGUMENT vm_ctl publish --volume b1 --target /dev/sda --block
[[ ! -e $publish_root/pv-b1/pod-ro ]] || vm_fail "a refused publish left its target file"
(($(mounts_below "$publish_root") == 1)) || vm_fail "a refusal changed the mounts"

vm_step "kill -9 nodevold mid-grow (its scratch LV left) and start it again: the bind stays, the scratch goes"
id1=$(awk -v t="$t1" '$5 == t {print $1}' /proc/self/mountinfo)
kill -9 "$VM_NODEVOLD_PID"; wait "$VM_NODEVOLD_PID" 2>/dev/null || true
# What a grow killed between its lvcreate and its lvremove leaves.
vm_run lvm lvcreate -qq -y -n nvg-b1 -L 8M --addtag nodevol.io/managed --addtag nodevol.io/grow-of=b1 \
  --addtag nodevol.io/pool=fast nv
vm_nodevold_start "--pool=name=fast,backend=lvm,vg=nv,devices=$disk"
[[ $(awk -v t="$t1" '$5 == t {print $1}' /proc/self/mountinfo) == "$id1" ]] || vm_fail "the bind at $t1 changed across the restart"
vm_ctl info | grep -qi "drift.*$t1" && vm_fail "reconcile reports drift on $t1: $(vm_ctl info)"
lvm lvs --noheadings -o lv_name nv | grep -qw nvg-b1 && vm_fail "the interrupted grow's scratch LV is still there"

vm_step "a filesystem volume full of a marker, deleted: its extents are free after b1's"
vm_run vm_ctl volume create old2 --pool fast --size 64Mi
t=$(vm_target pod-0 old2)
vm_run vm_ctl publish --volume old2 --target "$t"
head -c $((48 * MiB)) /dev/zero | tr '\0' '\253' >"$t/marker"
sync
vm_run vm_ctl unpublish --target "$t"
vm_run vm_ctl volume delete old2

vm_step "expand b1 to 96 MiB while published: the pod reads zeroes past the old end, not the marker (issue 58)"
vm_run vm_ctl volume expand b1 --size 96Mi
[[ $(blockdev --getsize64 "$t1") == $((96 * MiB)) ]] || vm_fail "the published device is $(blockdev --getsize64 "$t1") bytes"
cmp -s -n $((32 * MiB)) -i $((64 * MiB)):0 "$t1" /dev/zero ||
  vm_fail "the grown part of b1 shows a deleted volume's data: $(cmp -n $((32 * MiB)) -i $((64 * MiB)):0 "$t1" /dev/zero 2>&1)"
[[ $(head -c $((8 * MiB)) "$t1" | md5sum) == "$sum" ]] || vm_fail "the grow changed what the pod wrote"
lvm lvs --noheadings -o lv_name nv | grep -q nvg- && vm_fail "the grow left its scratch LV: $(lvm lvs --noheadings nv)"


vm_step "unpublish: the file goes; another pod reads the data"
vm_run vm_ctl unpublish --target "$t1"
[[ ! -e $t1 ]] || vm_fail "$t1 is still there after unpublish"
vm_run vm_ctl unpublish --target "$t1"  # idempotent
t2=$(block_target pv-b1 pod-2)
vm_run vm_ctl publish --volume b1 --target "$t2" --block
[[ $(head -c $((8 * MiB)) "$t2" | md5sum) == "$sum" ]] || vm_fail "pod-2 does not read what pod-1 wrote"
expect_code FAILED_PRECONDITION vm_ctl volume delete b1
vm_run vm_ctl unpublish --target "$t2"

vm_step "delete: LV gone, nothing mounted, no record"
vm_run vm_ctl volume delete b1
lvm lvs --noheadings -o lv_name nv | grep -q . && vm_fail "LVs left: $(lvm lvs --noheadings nv)"
(($(mounts_below "$VM_SANDBOX") == 0)) || vm_fail "mounts left: $(grep " $VM_SANDBOX/" /proc/self/mountinfo)"

vm_step "a thin pool that stops zeroing new blocks: no raw block create or grow on it"
vm_nodevold_stop
vm_nodevold_start "--pool=name=fast,backend=lvm,vg=nv,devices=$disk" \
  "--pool=name=thin,backend=lvm,vg=nv,type=thin,thinpool-size=128M"
vm_run vm_ctl volume create tb --pool thin --size 16Mi --block
vm_run lvm lvchange -qq --zero n nv/nodevol-thin
expect_code FAILED_PRECONDITION vm_ctl volume expand tb --size 32Mi
expect_code FAILED_PRECONDITION vm_ctl volume create tb2 --pool thin --size 16Mi --block
[[ $(lvm lvs --noheadings -o lv_size --units b --nosuffix nv/nv-tb | tr -d ' ') == $((16 * MiB)) ]] ||
  vm_fail "the refused grow changed tb's LV"
vm_run lvm lvchange -qq --zero y nv/nodevol-thin
vm_run vm_ctl volume expand tb --size 32Mi
vm_run vm_ctl volume delete tb
lvm lvs --noheadings -o lv_name nv | grep -v -w nodevol-thin | grep -q . && vm_fail "LVs left: $(lvm lvs --noheadings nv)"
vm_nodevold_stop
vm_step "ok"
