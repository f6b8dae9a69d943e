// LvmBackend: each volume is a logical volume in the pool's volume group,
// thick, or thin in the pool's thin pool, carrying its own filesystem
// (ext4 or xfs; pool default, or the volume's fs_type).
//
// Create: LV of the size rounded up to whole extents (tags: kManagedTag,
// the volume name, the pool), mkfs, mount at the staging directory
// <state dir>/staging/<pool>/<volume>, set the root's mode and owner
// (volume_root.h). The volume stays staged; pods get bind mounts of the
// staging directory; the node layer's Unstage after the last publication
// unmounts it. Expand: lvextend, then grow the filesystem online (mounting
// it for the purpose if needed). Delete: unmount, zero the first MiB of a
// thick LV (thin LVs free their blocks), lvremove.
//
// Pool options: pool_options.h. Capacity: capacity.h. With disk rules the
// volume group is built from matching disks at start and grows when a
// matching disk appears (disks.h).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "backend/backend.h"
#include "backend/disk_gate.h"
#include "backend/lvm/disks.h"
#include "backend/lvm/filesystem.h"
#include "backend/lvm/lvm.h"
#include "backend/lvm/pool_options.h"

namespace nodevol {

class LvmBackend : public Backend {
 public:
  // Parses the options, checks the tools, builds the volume group from
  // disks when rules are given, creates the thin pool when asked. A VG
  // that does not exist yet is logged, not fatal: the pool reports no
  // capacity until it appears (a disk may be hot-plugged later).
  static Status Make(const std::string& pool, const Params& options, const std::string& state_dir,
                     std::shared_ptr<Lvm> lvm, std::unique_ptr<Backend>* out,
                     std::chrono::milliseconds mkfs_timeout = kFsToolTimeout,
                     std::chrono::milliseconds io_limit = std::chrono::seconds(30));
  ~LvmBackend() override;

  std::string kind() const override { return "lvm"; }
  bool block_capable() const override { return true; }
  std::vector<std::string> fs_types() const override;
  bool size_enforced() const override { return true; }
  Params attributes() const override;

  Status Validate(const VolumeSpec& spec) const override;
  Status Create(VolumeRecord* record) override { return Create(record, /*resumed=*/false); }
  // An LV found under the volume's name is used only when `resumed` and
  // made after the record (BegunByRecord); else FAILED_PRECONDITION, and
  // the undo that follows (Delete) leaves it alone.
  Status Create(VolumeRecord* record, bool resumed) override;
  Status Delete(const VolumeRecord& record) override;
  Status Expand(VolumeRecord* record, uint64_t new_size) override;
  Status Stage(const VolumeRecord& record, std::string* path) override;
  // Staging mounts go through it, and so does the node's fsGroup walk.
  DiskGate* disk_gate() override { return gate_.get(); }
  Status Unstage(const VolumeRecord& record) override;
  std::string StagedMount(const VolumeRecord& record) const override { return StagingDir(record.spec.name); }
  Status Check(const VolumeRecord& record) override;
  Status GetCapacity(Capacity* out) override;
  Status Recover(std::vector<std::string>* drift) override;
  // How old a report Survey takes (the one Recover read just before).
  static constexpr int kStartReportAge = 2000;
  Status Survey(const std::set<std::string>& known, std::vector<VolumeRecord>* unrecorded,
                std::vector<std::string>* drift) override;
  // Thin pools only (backend/lvm/snapshot.cc): a snapshot is a thin
  // snapshot LV with activation skipped; a volume made from a snapshot or
  // a volume is an activatable thin snapshot of its LV, grown to size.
  bool snapshot_capable() const override { return options_.thin; }
  Status CreateSnapshot(const VolumeRecord& source, SnapshotRecord* snapshot, bool resumed) override;
  Status DeleteSnapshot(const SnapshotRecord& snapshot) override;
  Status CreateFrom(VolumeRecord* record, const SnapshotRecord* snapshot, const VolumeRecord* volume,
                    bool resumed) override;
  Status CheckSnapshot(const SnapshotRecord& snapshot) override;

 private:
  // Set by a create that refused an LV it found (its UUID) or whose lvcreate
  // failed (""), for the undo (Delete) that follows: that LV, or any, is not
  // this call's to remove. Never stored.
  static constexpr char kFoundNotMade[] = "lv_found_not_made";

  LvmBackend(std::string pool, LvmPoolOptions options, std::string staging_root, std::shared_ptr<Lvm> lvm);
  std::string FsOf(const VolumeRecord& record) const;
  // Create; an LV left by an interrupted create that will not activate is
  // removed and made again, once (may_recreate).
  Status CreateAttempt(VolumeRecord* record, bool resumed, bool may_recreate);
  std::string StagingDir(const std::string& volume) const { return staging_root_ + "/" + volume; }
  // Unmounts a staging dir within mkfs_timeout_: the last unmount of a
  // filesystem writes it back, which waits for as long as its disk does.
  Status UnmountStaging(const std::string& dir) const;
  // Our LV of `volume` in *lv (nullptr when there is none); FAILED_PRECONDITION
  // when an LV of that name exists but is not this volume's.
  // Also FAILED_PRECONDITION when it is another pool's (tag nodevol.io/pool=).
  Status FindLv(const std::string& volume, const LvmReport& report, const LvmLv** lv);
  // Whether `lv` can be the work of `record`'s create: made after the
  // record was written. Only then may a create format it, or its undo
  // remove it.
  bool BegunByRecord(const VolumeRecord& record, const LvmLv& lv) const;
  // After an lvcreate for volume (or snapshot) `name` failed: it may still
  // have made the LV (killed at its deadline by a disk that stopped
  // answering, or failing after writing the metadata). An LV of ours made
  // after the record (created_unix) is this create's, for its undo to
  // remove; one made before is not (kFoundNotMade = its UUID, and the
  // error saying so is returned); no LV, nothing to undo (""). Without a
  // fresh report nothing is marked: the undo reads again, or fails and
  // leaves the record "creating" for a retry or a delete.
  Status AfterFailedLvcreate(const std::string& name, bool snapshot, int64_t created_unix, Params* attributes);
  // FAILED_PRECONDITION: `lv` exists under the volume's name, not made by
  // this create.
  Status NotMadeHere(const std::string& volume, const LvmLv& lv) const;
  // The LV's device node, checked to be that LV's block device.
  Status DeviceOf(const LvmLv& lv, std::string* device);
  // Mounts the LV at its staging dir unless it already is; *mounted_now
  // says whether this call mounted it.
  Status EnsureMounted(const VolumeRecord& record, const LvmLv& lv, bool* mounted_now);
  // True when the record's device is what is mounted at its staging dir.
  bool StagedAlready(const VolumeRecord& record) const;
  Status CheckFits(const LvmReport& report, uint64_t more_bytes);
  // backend/lvm/grow.cc. A raw block volume's new blocks must read as
  // zeroes: a pod reads its device directly, and freed extents (or a thin
  // pool's reused blocks) hold earlier tenants' data.
  // FAILED_PRECONDITION naming the fix when this thin pool does not zero
  // the blocks it gives a volume (lvs -o zero).
  Status CheckThinPoolZeroes();
  // Zeroes all of `device` (BLKZEROOUT: the device writes zeroes itself
  // where it can); O_EXCL, so nothing else may have it open.
  // `step` (if set) after each 64 MiB, for a progress bound.
  static Status ZeroWhole(const std::string& device, const Step& step = {});
  // Grows the thick LV of block volume `volume` to `new_size` (rounded to
  // extents; *lv_bytes: its size after) onto extents zeroed before the LV
  // has them, so its pod never sees old bytes: a scratch LV
  // (GrowLvNameFor) takes them, is zeroed whole through the gate (a step
  // per 64 MiB, outside the allocation lock: the scratch LV holds them)
  // and removed, and lvextend takes exactly its extents.
  Status GrowZeroed(const std::string& volume, uint64_t new_size, uint64_t* lv_bytes);
  // Removes a scratch LV an interrupted GrowZeroed of `volume` left
  // (nothing when there is none); *removed says whether it did.
  Status RemoveScratch(const std::string& volume, const LvmReport& report, bool* removed = nullptr);
  // Our LV of snapshot `name` in *lv (nullptr when none), like FindLv.
  Status FindSnapshotLv(const std::string& name, const LvmReport& report, const LvmLv** lv);
  // FAILED_PRECONDITION naming why this pool takes no snapshots, or OK.
  Status SnapshotsAllowed() const;
  Status SetUpVolumeGroup();
  // <state dir>/lvm/<vg>.vg-uuid: the VG's UUID once seen, so a VG that is
  // late at a later start is not created a second time (disks.h).
  std::string KnownVgUuid() const;
  void RememberVgUuid(const std::string& uuid);
  void OnDiskAdded(const DiskInfo& disk);

  const std::string pool_;
  const LvmPoolOptions options_;
  const std::string staging_root_;
  std::string vg_uuid_dir_;  // <state dir>/lvm
  std::shared_ptr<Lvm> lvm_;
  std::chrono::milliseconds mkfs_timeout_ = kFsToolTimeout;  // of mkfs and grows
  std::unique_ptr<DiskGate> gate_;  // set by Make
  // Serializes capacity check + lvcreate/lvextend in this pool's volume
  // group (Lvm::AllocationLock, one for every pool on it): lvm enforces a
  // VG's free space but not a thin pool's overprovision ratio, and a
  // block grow's zeroed extents must not be taken by another pool's
  // create between the scratch LV's removal and the lvextend.
  std::mutex* allocate_mu_ = nullptr;
  // Serializes volume group set-up (start, and each disk the monitor sees).
  std::mutex setup_mu_;
  std::unique_ptr<DiskMonitor> monitor_;
};

}  // namespace nodevol
