// Node: snapshots of volumes, and the sources volumes are made from.
//
// Locks: CreateSnapshot holds the snapshot's lock, then its source
// volume's (so the volume is neither deleted nor grown under it). A
// volume made from a source holds only its own lock: a source in use by
// such a create is marked by the new volume's "creating" record, which
// DeleteSnapshot and DeleteVolume check under mu_ (MadeFromLocked), so
// no two locks are ever taken in the other order.
#include <ctime>

#include <spdlog/spdlog.h>

#include "base/names.h"
#include "base/size.h"
#include "node/node.h"

namespace nodevol {

std::string Node::MadeFromLocked(const std::string& snapshot, const std::string& volume) const {
  for (const auto& [name, v] : volumes_) {
    if (v.state != VolumeState::kCreating) continue;
    if ((!snapshot.empty() && v.spec.from_snapshot == snapshot) || (!volume.empty() && v.spec.from_volume == volume))
      return name;
  }
  return "";
}

Status Node::CheckSourceLocked(const VolumeSpec& spec, SnapshotRecord* snap, VolumeRecord* vol) const {
  std::string what, pool, fs;
  uint64_t size = 0;
  bool block = false;
  if (!spec.from_snapshot.empty()) {
    auto it = snapshots_.find(spec.from_snapshot);
    if (it == snapshots_.end())
      return Status::NotFound("snapshot " + spec.from_snapshot + " does not exist on this node");
    *snap = it->second;
    if (snap->state != VolumeState::kReady)
      return Status::FailedPrecondition("snapshot " + snap->name + " is " + ToString(snap->state) + ", not ready");
    what = "snapshot " + snap->name;
    pool = snap->pool, fs = snap->fs_type, size = snap->size_bytes, block = snap->block;
  } else {
    auto it = volumes_.find(spec.from_volume);
    if (it == volumes_.end() || it->second.shared_copy)
      return Status::NotFound("volume " + spec.from_volume + " does not exist on this node");
    *vol = it->second;
    if (vol->state != VolumeState::kReady)
      return Status::FailedPrecondition("volume " + vol->spec.name + " is " + ToString(vol->state) + ", not ready");
    what = "volume " + vol->spec.name;
    pool = vol->spec.pool, fs = vol->spec.fs_type, size = vol->spec.size_bytes, block = vol->spec.block;
    // The filesystem it really has (lvm records it when the spec left it
    // to the pool's default).
    if (auto it = vol->attributes.find("fs"); it != vol->attributes.end()) fs = it->second;
  }
  // Local storage: the content is in the source's pool, and nowhere else.
  if (pool != spec.pool)
    return Status::InvalidArgument(what + " is in pool " + pool + "; a volume made from it must be in that pool too, "
                                   "not " + spec.pool);
  if (spec.size_bytes < size)
    return Status::InvalidArgument(what + " is " + ExactBytes(size) + "; a volume made from it must be at least that "
                                   "big, not " + ExactBytes(spec.size_bytes));
  if (block != spec.block)
    return Status::InvalidArgument(what + (block ? " is a raw block volume; ask for raw block access"
                                                 : " holds a filesystem; a raw block volume cannot be made from it"));
  if (!spec.fs_type.empty() && !fs.empty() && spec.fs_type != fs)
    return Status::InvalidArgument(what + " holds " + fs + ", not " + spec.fs_type +
                                   "; ask for " + fs + " or leave fs_type empty");
  return Status::Ok();
}

Status Node::CreateSnapshot(const std::string& name, const std::string& source, SnapshotRecord* out) {
  NODEVOL_RETURN_IF_ERROR(ValidateSnapshotName(name));
  NODEVOL_RETURN_IF_ERROR(ValidateVolumeName(source));
  LockTable::Guard gs(&locks_, SnapshotKey(name));
  NODEVOL_RETURN_IF_ERROR(gs.status());
  LockTable::Guard gv(&locks_, VolumeKey(source));
  NODEVOL_RETURN_IF_ERROR(gv.status());
  SnapshotRecord rec;
  VolumeRecord vol;
  bool resumed = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = snapshots_.find(name);
    if (it != snapshots_.end()) {
      rec = it->second;
      resumed = true;
    }
    auto v = volumes_.find(source);
    if (v != volumes_.end() && !v->second.shared_copy) vol = v->second;
  }
  if (resumed) {
    if (rec.source != source)
      return Status::AlreadyExists("snapshot " + name + " already exists, of volume " + rec.source + " (asked: " +
                                   source + ")");
    if (rec.state == VolumeState::kDeleting)
      return Status::FailedPrecondition("snapshot " + name + " is being deleted; call DeleteSnapshot to finish");
    if (rec.state == VolumeState::kReady) {
      *out = rec;
      return Status::Ok();
    }
  }
  if (vol.spec.name.empty()) return Status::NotFound("volume " + source + " does not exist on this node");
  if (vol.state != VolumeState::kReady)
    return Status::FailedPrecondition("volume " + source + " is " + ToString(vol.state) + ", not ready");
  Backend* b = FindPool(vol.spec.pool);
  if (!b) return Status::FailedPrecondition("pool " + vol.spec.pool + " of volume " + source + " is not configured");
  // Refused before any record is written: a refusal touches nothing.
  if (!b->snapshot_capable())
    return Status::FailedPrecondition("pool " + vol.spec.pool + " (" + b->kind() + (b->kind() == "lvm" ? ", thick" : "") +
                                      ") does not take snapshots; use an lvm thin or a dir pool (docs/snapshots.md)");
  if (!resumed) {
    rec = SnapshotRecord{name, source, vol.spec.pool, b->kind(), vol.spec.size_bytes, vol.spec.fs_type,
                         vol.spec.block, VolumeState::kCreating, static_cast<int64_t>(std::time(nullptr)), {}};
    // The filesystem the volume really has (lvm records it when the spec
    // left it to the pool's default).
    if (auto fs = vol.attributes.find("fs"); fs != vol.attributes.end()) rec.fs_type = fs->second;
    NODEVOL_RETURN_IF_ERROR(store_->PutSnapshot(rec));
    std::lock_guard<std::mutex> l(mu_);
    PutSnapshotLocked(rec);
  }
  Status st = b->CreateSnapshot(vol, &rec, resumed);
  if (!st.ok()) {
    // As for volumes: nothing of a snapshot that never became ready is
    // kept, unless undoing fails too (then a retry or DeleteSnapshot ends it).
    if (b->DeleteSnapshot(rec).ok() && store_->RemoveSnapshot(name).ok()) {
      std::lock_guard<std::mutex> l(mu_);
      EraseSnapshotLocked(name);
    }
    ++generation_;
    return st.WithContext("snapshot " + name + " of volume " + source);
  }
  rec.state = VolumeState::kReady;
  NODEVOL_RETURN_IF_ERROR(store_->PutSnapshot(rec));
  {
    std::lock_guard<std::mutex> l(mu_);
    PutSnapshotLocked(rec);
  }
  ++generation_;
  spdlog::info("snapshot {} of volume {} (pool {}, {} bytes) is ready", name, source, rec.pool, rec.size_bytes);
  *out = rec;
  return Status::Ok();
}

Status Node::DeleteSnapshot(const std::string& name, bool* existed) {
  NODEVOL_RETURN_IF_ERROR(ValidateSnapshotName(name));
  LockTable::Guard g(&locks_, SnapshotKey(name));
  NODEVOL_RETURN_IF_ERROR(g.status());
  return DeleteSnapshotLocked(name, existed);
}

Status Node::DeleteSnapshotLocked(const std::string& name, bool* existed) {
  SnapshotRecord rec;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = snapshots_.find(name);
    *existed = it != snapshots_.end();
    if (!*existed) return Status::Ok();
    std::string user = MadeFromLocked(name, "");
    if (!user.empty())
      return Status::FailedPrecondition("volume " + user + " is being made from snapshot " + name +
                                        "; delete the snapshot once that create has ended");
    // Marked under mu_: a create from it that starts now finds it not ready.
    it->second.state = VolumeState::kDeleting;
    rec = it->second;
  }
  Backend* b = FindPool(rec.pool);
  if (!b)
    return Status::FailedPrecondition("snapshot " + name + " is in pool " + rec.pool +
                                      ", which is no longer configured; restore the pool to delete it");
  NODEVOL_RETURN_IF_ERROR(store_->PutSnapshot(rec));
  NODEVOL_RETURN_IF_ERROR(b->DeleteSnapshot(rec).WithContext("delete snapshot " + name));
  NODEVOL_RETURN_IF_ERROR(store_->RemoveSnapshot(name));
  {
    std::lock_guard<std::mutex> l(mu_);
    EraseSnapshotLocked(name);
  }
  ++generation_;
  spdlog::info("snapshot {} of volume {} deleted", name, rec.source);
  return Status::Ok();
}

Status Node::GetSnapshot(const std::string& name, SnapshotRecord* out) {
  NODEVOL_RETURN_IF_ERROR(ValidateSnapshotName(name));
  std::lock_guard<std::mutex> l(mu_);
  auto it = snapshots_.find(name);
  if (it == snapshots_.end()) return Status::NotFound("snapshot " + name + " does not exist on this node");
  *out = it->second;
  return Status::Ok();
}

Status Node::ListSnapshots(const std::string& source, std::vector<SnapshotRecord>* out) {
  if (!source.empty()) NODEVOL_RETURN_IF_ERROR(ValidateVolumeName(source));
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [_, s] : snapshots_)
    if (source.empty() || s.source == source) out->push_back(s);
  return Status::Ok();
}

void Node::ReconcileSnapshots(std::vector<SnapshotRecord> snaps) {
  for (const SnapshotRecord& s : snaps) {
    Backend* b = FindPool(s.pool);
    if (!b) {
      AddDrift("snapshot " + s.name + " is in pool " + s.pool + ", which is not configured; record kept");
    } else if (s.state == VolumeState::kDeleting) {
      bool existed = false;
      LockTable::Guard g(&locks_, SnapshotKey(s.name));
      Status st = g.status().ok() ? DeleteSnapshotLocked(s.name, &existed) : g.status();
      AddDrift(st.ok() ? "finished deleting snapshot " + s.name
                       : "could not finish deleting snapshot " + s.name + ": " + st.message());
    } else if (s.state == VolumeState::kCreating) {
      AddDrift("snapshot " + s.name + " was being taken when nodevold stopped; CreateSnapshot finishes it, "
               "DeleteSnapshot removes it");
    } else if (Status st = b->CheckSnapshot(s); !st.ok()) {
      AddDrift("snapshot " + s.name + ": " + st.message());
    }
  }
}

}  // namespace nodevol
