// LvmBackend: snapshots, and volumes made from snapshots or volumes.
//
// Thin pools only. A snapshot is `lvcreate -s` of the volume's thin LV:
// no copy, the pool shares the blocks until either side writes. lvm
// suspends the origin's device for it, which freezes a mounted filesystem,
// so the snapshot is a clean point in time even while a pod writes. The
// snapshot keeps lvm's activation skip flag: it is never mounted, only
// made into volumes. A restore (or clone) is an activatable thin snapshot
// of the snapshot (or of the volume), grown to the size asked for: no
// mkfs, the filesystem is the source's, grown online to fill the LV.
// Thick pools refuse: a thick LVM snapshot needs its own space reserved up
// front, slows every write to its origin and is lost when that space runs
// out (docs/snapshots.md).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>

#include "backend/lvm/capacity.h"
#include "backend/lvm/filesystem.h"
#include "backend/lvm/lv_name.h"
#include "backend/lvm/lvm_backend.h"

namespace nodevol {

Status LvmBackend::SnapshotsAllowed() const {
  if (options_.thin) return Status::Ok();
  return Status::FailedPrecondition("pool " + pool_ + " is a thick lvm pool; only thin pools take snapshots and "
                                    "make volumes from them" + SnapshotHelp());
}

Status LvmBackend::FindSnapshotLv(const std::string& name, const LvmReport& report, const LvmLv** lv) {
  *lv = nullptr;
  const std::string lv_name = SnapshotLvNameFor(name);
  const LvmLv* found = report.FindLv(options_.vg, lv_name);
  if (!found) return Status::Ok();
  if (!found->HasTag(kManagedTag) || !found->HasTag(kSnapshotTagPrefix + name) ||
      !found->HasTag(kPoolTagPrefix + pool_))
    return Status::FailedPrecondition("logical volume " + options_.vg + "/" + lv_name +
                                      " exists but is not nodevold's LV of snapshot " + name + " in pool " + pool_ +
                                      "; rename or remove it, nodevold will not touch it");
  *lv = found;
  return Status::Ok();
}

Status LvmBackend::CreateSnapshot(const VolumeRecord& source, SnapshotRecord* snapshot, bool resumed) {
  NODEVOL_RETURN_IF_ERROR(SnapshotsAllowed());
  const std::string& name = snapshot->name;
  const std::string lv_name = SnapshotLvNameFor(name);
  std::lock_guard<std::mutex> l(*allocate_mu_);
  // Fresh: a snapshot decides what exists on what lvm says now.
  LvmReport report;
  NODEVOL_RETURN_IF_ERROR(lvm_->Report(&report, /*fresh=*/true));
  const LvmLv* origin = nullptr;
  NODEVOL_RETURN_IF_ERROR(FindLv(source.spec.name, report, &origin));
  if (!origin)
    return Status::FailedPrecondition("volume " + source.spec.name + " has no logical volume " + options_.vg + "/" +
                                      LvNameFor(source.spec.name) + " (removed by hand?); nothing to snapshot");
  const LvmLv* lv = nullptr;
  NODEVOL_RETURN_IF_ERROR(FindSnapshotLv(name, report, &lv));
  if (lv) {
    // Only a retried create may take an LV it finds, and only one made
    // after its record was written.
    if (!resumed || snapshot->state != VolumeState::kCreating || lv->created_unix < snapshot->created_unix) {
      snapshot->attributes[kFoundNotMade] = lv->uuid;
      return Status::FailedPrecondition("logical volume " + options_.vg + "/" + lv->name + " of snapshot " + name +
                                        " already exists and no record says this create made it; remove it "
                                        "(lvremove " + options_.vg + "/" + lv->name + ") if it is not needed");
    }
  } else {
    // A snapshot can come to need all of its origin's size again, so it
    // counts as that much against the pool's overprovisioned room.
    NODEVOL_RETURN_IF_ERROR(CheckFits(report, origin->size));
    Status st = lvm_->CreateSnapshot(options_.vg, origin->name, lv_name,
                                     {kSnapshotTagPrefix + name, kPoolTagPrefix + pool_}, /*activatable=*/false);
    if (!st.ok()) {
      (void)AfterFailedLvcreate(name, /*snapshot=*/true, snapshot->created_unix, &snapshot->attributes);
      return MapLvmNoSpace(st);
    }
  }
  snapshot->attributes = {{"vg", options_.vg}, {"lv", lv_name}, {"origin_lv", origin->name},
                          {"lv_bytes", std::to_string(origin->size)}};
  spdlog::info("pool {}: snapshot {} of volume {} is thin LV {}/{}", pool_, name, source.spec.name, options_.vg,
               lv_name);
  return Status::Ok();
}

Status LvmBackend::DeleteSnapshot(const SnapshotRecord& snapshot) {
  const std::string& name = snapshot.name;
  LvmReport report;
  NODEVOL_RETURN_IF_ERROR(lvm_->Report(&report, /*fresh=*/true));
  const LvmLv* lv = nullptr;
  if (Status st = FindSnapshotLv(name, report, &lv); !st.ok()) {
    spdlog::warn("pool {}: deleting snapshot {}: {}", pool_, name, st.message());
    return Status::Ok();
  }
  if (!lv) return Status::Ok();
  auto found = snapshot.attributes.find(kFoundNotMade);
  bool not_made_here = found != snapshot.attributes.end() && (found->second.empty() || found->second == lv->uuid);
  if (snapshot.state == VolumeState::kCreating && (lv->created_unix < snapshot.created_unix || not_made_here)) {
    spdlog::warn("pool {}: snapshot {} never became ready; LV {}/{} is not its create's work and is left alone",
                 pool_, name, options_.vg, lv->name);
    return Status::Ok();
  }
  // Volumes made from it are nodevold's thin snapshots of it and do not
  // depend on it (report.h); anything else (an operator's snapshot) does.
  if (auto deps = report.DependentsOf(*lv); !deps.empty()) {
    std::string list;
    for (const auto& d : deps) list += (list.empty() ? "" : ", ") + d;
    return Status::FailedPrecondition("logical volume " + options_.vg + "/" + lv->name + " of snapshot " + name +
                                      " has " + list + ": remove them first (lvremove); nodevold removes nothing "
                                      "it did not make");
  }
  NODEVOL_RETURN_IF_ERROR(lvm_->Remove(options_.vg, lv->name, lv->uuid));
  spdlog::info("pool {}: removed LV {}/{} of snapshot {}", pool_, options_.vg, lv->name, name);
  return Status::Ok();
}

Status LvmBackend::CheckSnapshot(const SnapshotRecord& snapshot) {
  // Shared, not copied, as Check: a start checks every snapshot.
  std::shared_ptr<const LvmReport> report;
  NODEVOL_RETURN_IF_ERROR(lvm_->Kept(&report));
  const LvmLv* lv = nullptr;
  NODEVOL_RETURN_IF_ERROR(FindSnapshotLv(snapshot.name, *report, &lv));
  if (!lv)
    return Status::NotFound("logical volume " + options_.vg + "/" + SnapshotLvNameFor(snapshot.name) +
                            " is missing");
  return Status::Ok();
}

Status LvmBackend::CreateFrom(VolumeRecord* record, const SnapshotRecord* snapshot, const VolumeRecord* volume,
                              bool resumed) {
  NODEVOL_RETURN_IF_ERROR(SnapshotsAllowed());
  const std::string& name = record->spec.name;
  const std::string lv_name = LvNameFor(name);
  const std::string what = snapshot ? "snapshot " + snapshot->name : "volume " + volume->spec.name;
  LvmReport report;
  const LvmLv* lv = nullptr;
  uint64_t bytes = 0;
  {
    std::lock_guard<std::mutex> l(*allocate_mu_);
    NODEVOL_RETURN_IF_ERROR(lvm_->Report(&report, /*fresh=*/true));
    const LvmLv* origin = nullptr;
    if (snapshot) NODEVOL_RETURN_IF_ERROR(FindSnapshotLv(snapshot->name, report, &origin));
    else NODEVOL_RETURN_IF_ERROR(FindLv(volume->spec.name, report, &origin));
    NODEVOL_RETURN_IF_ERROR(FindLv(name, report, &lv));
    if (lv && (!resumed || record->state != VolumeState::kCreating || !BegunByRecord(*record, *lv))) {
      record->attributes[kFoundNotMade] = lv->uuid;
      return NotMadeHere(name, *lv);
    }
    const LvmVg* vg = report.FindVg(options_.vg);
    if (!vg) return Status::FailedPrecondition("volume group " + options_.vg + " of pool " + pool_ + " does not exist");
    bytes = RoundToExtents(record->spec.size_bytes, vg->extent_size);
    // As a new raw block volume: its grown part and the blocks its pod
    // provisions must read as zeroes.
    if (record->spec.block) NODEVOL_RETURN_IF_ERROR(CheckThinPoolZeroes());
    if (!lv) {
      if (!origin)
        return Status::FailedPrecondition(what + " has no logical volume in " + options_.vg + " (removed by hand?)");
      NODEVOL_RETURN_IF_ERROR(CheckFits(report, std::max(bytes, origin->size)));
      Status st = lvm_->CreateSnapshot(options_.vg, origin->name, lv_name,
                                       {kVolumeTagPrefix + name, kPoolTagPrefix + pool_}, /*activatable=*/true);
      if (!st.ok()) {
        Status other = AfterFailedLvcreate(name, false, record->created_unix, &record->attributes);
        return other.ok() ? MapLvmNoSpace(st) : other;
      }
      NODEVOL_RETURN_IF_ERROR(lvm_->Report(&report, /*fresh=*/true));
      NODEVOL_RETURN_IF_ERROR(FindLv(name, report, &lv));
      if (!lv) return Status::Internal("lvcreate made no LV " + options_.vg + "/" + lv_name);
    }
    if (lv->size < bytes) {
      NODEVOL_RETURN_IF_ERROR(MapLvmNoSpace(lvm_->Extend(options_.vg, lv->name, bytes)));
      NODEVOL_RETURN_IF_ERROR(lvm_->Report(&report, /*fresh=*/true));
      NODEVOL_RETURN_IF_ERROR(FindLv(name, report, &lv));
      if (!lv) return Status::Internal("LV " + options_.vg + "/" + lv_name + " vanished while growing");
    }
  }
  std::string device;
  NODEVOL_RETURN_IF_ERROR(DeviceOf(*lv, &device));
  if (record->spec.block) {
    record->attributes = {{"vg", options_.vg}, {"lv", lv->name}, {"device", device},
                          {"lv_bytes", std::to_string(lv->size)}};
    spdlog::info("pool {}: volume {} is thin LV {}/{} made from {} (raw block)", pool_, name, options_.vg, lv->name,
                 what);
    return Status::Ok();
  }
  std::string fs = snapshot ? snapshot->fs_type : FsOf(*volume);
  if (fs.empty()) fs = options_.fs;
  const std::string dir = StagingDir(name);
  record->attributes = {{"vg", options_.vg}, {"lv", lv->name},  {"device", device},
                        {"fs", fs},          {"path", dir},      {"lv_bytes", std::to_string(lv->size)}};
  bool mounted_now = false;
  NODEVOL_RETURN_IF_ERROR(EnsureMounted(*record, *lv, &mounted_now));
  // The source's filesystem fills the source's LV (a create makes it so,
  // an expand grows it before it counts): at the same size there is
  // nothing to grow, and resize2fs would cost a process for nothing.
  const auto& source_attrs = snapshot ? snapshot->attributes : volume->attributes;
  auto source_bytes = source_attrs.find("lv_bytes");
  if (source_bytes == source_attrs.end() || source_bytes->second != std::to_string(lv->size))
    NODEVOL_RETURN_IF_ERROR(GrowFs(fs, device, dir, mkfs_timeout_).WithContext("grow the filesystem of " + name + " to its LV"));
  spdlog::info("pool {}: volume {} is thin LV {}/{} ({} bytes, {}) made from {}", pool_, name, options_.vg, lv->name,
               lv->size, fs, what);
  return Status::Ok();
}

}  // namespace nodevol
