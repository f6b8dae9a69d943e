#!/bin/bash
# lvm-by-hand.sh: the baseline of bench/lvm_bench.cc. One volume operation
# per call, done the way an operator would do it in a shell, with exactly
# the lvm, mkfs and mount options nodevold uses (mountd/backend/lvm/lvm.cc,
# lvm_backend.cc, filesystem.cc, mount/bind.cc):
#
#   lvm-by-hand.sh create thick VG - LV VOLUME POOL BYTES STAGING
#   lvm-by-hand.sh create thin VG THINPOOL LV VOLUME POOL BYTES STAGING
#       lvcreate (thick: -y -Wy -Zy -L; thin: -y -V --thinpool, with the
#       tags nodevold adds), mkfs.ext4 -q -F -m 0 -E lazy_itable_init=1,
#       lazy_journal_init=1,nodiscard, mount -o nosuid,nodev on STAGING,
#       chmod 0777 of the filesystem root (nodevold's default volume root)
#   lvm-by-hand.sh publish STAGING TARGET          mount --bind
#   lvm-by-hand.sh unpublish TARGET STAGING        umount both
#   lvm-by-hand.sh delete thick|thin VG LV         thick: zero the first MiB
#       (dd ... conv=fdatasync, as nodevold's ZeroStart), then lvremove -y
#   lvm-by-hand.sh snapshot VG ORIGIN SNAPLV NAME POOL   lvcreate -s -k y (thin)
#   lvm-by-hand.sh restore VG SNAPLV LV VOLUME POOL STAGING
#       lvcreate -s -k n of the snapshot, mount on STAGING; a restored or
#       snapshot LV goes with `delete thin VG LV` (lvremove)
#   lvm-by-hand.sh report    the `lvm fullreport` nodevold runs (not part of
#                            the baseline: the cost of one such process)
#   lvm-by-hand.sh lvm-floor `lvm version`: the floor of any lvm process
#   lvm-by-hand.sh noop      nothing: the cost of starting this script
#
# STAGING and TARGET must exist (the benchmark makes and removes the
# directories; nodevold does that with in-process syscalls).
#
# Output on stdout, for the benchmark to parse: one line per command,
#   T <label> <microseconds>
# timed with bash's $EPOCHREALTIME (no `date` process), then
#   TOTAL <microseconds>
# The commands' own output goes to stderr; a failure exits 1.
set -euo pipefail
export LC_ALL=C
# No udevd in a plain guest: lvm must create the /dev nodes itself and not
# wait for udev, as nodevold does (it sets this when /run/udev/control is
# missing).
[[ -e /run/udev/control ]] || export DM_DISABLE_UDEV=1

# bash leaves a saved descriptor or two open across exec; lvm would warn
# about each on stderr ("File descriptor 10 leaked"). nodevold's children
# get only fds 0-2.
export LVM_SUPPRESS_FD_WARNINGS=1
LVM=${LVM:-/usr/sbin/lvm}
total=0

# step LABEL COMMAND...: runs the command (its stdout to stderr), prints
# its wall time; exits 1 when it fails. No process but the command itself.
step() {
  local label=$1 t0 t1
  shift
  t0=${EPOCHREALTIME/./}
  if ! "$@" >&2; then
    echo "lvm-by-hand.sh: $label failed: $*" >&2
    exit 1
  fi
  t1=${EPOCHREALTIME/./}
  echo "T $label $((10#$t1 - 10#$t0))"
  total=$((total + 10#$t1 - 10#$t0))
}

op=${1:?usage: lvm-by-hand.sh create|publish|unpublish|delete|snapshot|restore|report|lvm-floor|noop ...}
shift
case $op in
  create)
    type=$1 vg=$2 thinpool=$3 lv=$4 volume=$5 pool=$6 bytes=$7 staging=$8
    tags=(--addtag nodevol.io/managed --addtag "nodevol.io/volume=$volume" --addtag "nodevol.io/pool=$pool")
    if [[ $type == thick ]]; then
      step lvcreate "$LVM" lvcreate -y -Wy -Zy -n "$lv" -L "${bytes}b" "${tags[@]}" "$vg"
    else
      step lvcreate "$LVM" lvcreate -y -n "$lv" -V "${bytes}b" --thinpool "$vg/$thinpool" "${tags[@]}"
    fi
    step mkfs.ext4 mkfs.ext4 -q -F -m 0 -E lazy_itable_init=1,lazy_journal_init=1,nodiscard "/dev/$vg/$lv"
    step mount mount -t ext4 -o nosuid,nodev "/dev/$vg/$lv" "$staging"
    step chmod chmod 0777 "$staging"
    ;;
  publish)
    step mount-bind mount --bind "$1" "$2"
    ;;
  unpublish)
    step umount-target umount "$1"
    step umount-staging umount "$2"
    ;;
  delete)
    type=$1 vg=$2 lv=$3
    [[ $type == thick ]] && step dd dd if=/dev/zero of="/dev/$vg/$lv" bs=1M count=1 conv=fdatasync status=none
    step lvremove "$LVM" lvremove -y "$vg/$lv"
    ;;
  snapshot)
    # A thin snapshot, activation skipped, tagged as nodevold tags one
    # (backend/lvm/snapshot.cc, lvm.cc Lvm::CreateSnapshot).
    vg=$1 origin=$2 lv=$3 name=$4 pool=$5
    step lvcreate-snapshot "$LVM" lvcreate -y -s -n "$lv" -k y --addtag nodevol.io/managed \
      --addtag "nodevol.io/snapshot=$name" --addtag "nodevol.io/pool=$pool" "$vg/$origin"
    ;;
  restore)
    # A volume from a snapshot at the snapshot's size: a thin snapshot of
    # it, activated, its filesystem mounted on STAGING.
    vg=$1 snap=$2 lv=$3 volume=$4 pool=$5 staging=$6
    step lvcreate-restore "$LVM" lvcreate -y -s -n "$lv" -k n --addtag nodevol.io/managed \
      --addtag "nodevol.io/volume=$volume" --addtag "nodevol.io/pool=$pool" "$vg/$snap"
    step mount mount -t ext4 -o nosuid,nodev "/dev/$vg/$lv" "$staging"
    ;;
  report)
    # mountd/backend/lvm/report.cc FullReportArgs(), verbatim.
    step fullreport "$LVM" fullreport --reportformat json --units b --nosuffix \
      --configreport vg -o vg_name,vg_uuid,vg_size,vg_free,vg_extent_size \
      --configreport pv -o pv_name,vg_name,pv_size,pv_free \
      --configreport lv -o lv_name,lv_uuid,vg_name,lv_path,lv_size,lv_attr,lv_tags,pool_lv,data_percent,metadata_percent,lv_metadata_size,lv_kernel_major,lv_kernel_minor \
      --configreport pvseg -o pvseg_start --configreport seg -o seg_size
    ;;
  lvm-floor)
    step lvm-version "$LVM" version
    ;;
  noop) ;;
  *)
    echo "lvm-by-hand.sh: unknown operation $op" >&2
    exit 2
    ;;
esac
echo "TOTAL $total"
