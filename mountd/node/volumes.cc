// Node: the volume lifecycle (create, delete, expand, get, list, capacity).
#include <ctime>

#include <spdlog/spdlog.h>

#include "base/names.h"
#include "base/size.h"
#include "mount/bind.h"
#include "node/node.h"

namespace nodevol {
namespace {

std::string SourceText(const VolumeSpec& s) {
  if (!s.from_snapshot.empty()) return "snapshot " + s.from_snapshot;
  if (!s.from_volume.empty()) return "volume " + s.from_volume;
  return "empty";
}

}  // namespace

std::string SpecDifference(const VolumeSpec& have, const VolumeSpec& want, bool compare_size) {
  if (have.pool != want.pool) return "pool " + have.pool + " (asked: " + want.pool + ")";
  if (compare_size && have.size_bytes != want.size_bytes)
    return "size " + ExactBytes(have.size_bytes) + " (asked: " + ExactBytes(want.size_bytes) + ")";
  if (have.fs_type != want.fs_type) return "fs_type \"" + have.fs_type + "\" (asked: \"" + want.fs_type + "\")";
  if (have.parameters != want.parameters) return "other parameters";
  if (have.block != want.block) return have.block ? "raw block access (asked: a filesystem)" : "a filesystem (asked: raw block)";
  if (have.from_snapshot != want.from_snapshot || have.from_volume != want.from_volume)
    return "another content source (" + SourceText(have) + "; asked: " + SourceText(want) + ")";
  return "";
}

Node::Node(std::string pods_root, Store* store, std::map<std::string, std::unique_ptr<Backend>> pools)
    : pods_root_(std::move(pods_root)), store_(store), pools_(std::move(pools)) {}

Backend* Node::FindPool(const std::string& pool) const {
  auto it = pools_.find(pool);
  return it == pools_.end() ? nullptr : it->second.get();
}

std::vector<PoolView> Node::Pools() const {
  std::vector<PoolView> out;
  for (const auto& [name, b] : pools_)
    out.push_back({name, b->kind(), b->fs_types(), b->size_enforced(), b->attributes(), b->snapshot_capable()});
  return out;
}

std::vector<std::string> Node::Drift() const {
  std::lock_guard<std::mutex> l(mu_);
  return drift_;
}

void Node::AddDrift(std::string line) {
  std::lock_guard<std::mutex> l(mu_);
  drift_.push_back(std::move(line));
}

bool Node::LookupVolume(const std::string& name, VolumeRecord* out) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = volumes_.find(name);
  if (it == volumes_.end()) return false;
  *out = it->second;
  return true;
}

std::vector<std::string> Node::PublishedAt(const std::string& volume) const {
  std::lock_guard<std::mutex> l(mu_);
  return publications_.TargetsOf(volume);
}

void Node::PutVolumeLocked(const VolumeRecord& v) {
  EraseVolumeLocked(v.spec.name);
  volumes_[v.spec.name] = v;
  PoolUsage& u = usage_[v.spec.pool];
  u.allocated_bytes += v.spec.size_bytes;
  ++u.volumes;
}

void Node::EraseVolumeLocked(const std::string& name) {
  auto it = volumes_.find(name);
  if (it == volumes_.end()) return;
  PoolUsage& u = usage_[it->second.spec.pool];
  u.allocated_bytes -= it->second.spec.size_bytes;
  --u.volumes;
  volumes_.erase(it);
}

void Node::PutSnapshotLocked(const SnapshotRecord& s) {
  EraseSnapshotLocked(s.name);
  snapshots_[s.name] = s;
  ++usage_[s.pool].snapshots;
}

void Node::EraseSnapshotLocked(const std::string& name) {
  auto it = snapshots_.find(name);
  if (it == snapshots_.end()) return;
  --usage_[it->second.pool].snapshots;
  snapshots_.erase(it);
}

void Node::SaveVolumeInMemory(const VolumeRecord& v) {
  {
    std::lock_guard<std::mutex> l(mu_);
    PutVolumeLocked(v);
  }
  ++generation_;
}

Status Node::GetCapacity(const std::string& pool, std::vector<PoolCapacityView>* out) {
  if (!pool.empty() && !FindPool(pool)) return Status::NotFound("pool \"" + pool + "\" is not configured on this node");
  for (const auto& [name, b] : pools_) {
    if (!pool.empty() && name != pool) continue;
    Capacity cap;
    Status st = b->GetCapacity(&cap).WithContext("pool " + name);
    if (!st.ok() && !pool.empty()) return st;
    if (!st.ok()) {
      // Every pool at once (nodevolctl capacity, the capacity monitor and so
      // WatchCapacity): one pool without figures (an NFS server down at
      // boot) is left out rather than hiding every other pool of the node;
      // a pool missing from the report takes no new volumes.
      spdlog::warn("capacity of pool {} left out: {}", name, st.ToString());
      continue;
    }
    PoolCapacityView v{name, b->kind(), cap.total_bytes, cap.free_bytes, 0, 0, 0, cap.data_percent,
                       cap.metadata_percent};
    {
      std::lock_guard<std::mutex> l(mu_);
      if (auto it = usage_.find(name); it != usage_.end()) {
        v.allocated_bytes = it->second.allocated_bytes;
        v.volume_count = it->second.volumes;
        v.snapshot_count = it->second.snapshots;
      }
    }
    out->push_back(v);
  }
  return Status::Ok();
}

Status Node::CheckSpec(const VolumeSpec& spec) const {
  NODEVOL_RETURN_IF_ERROR(ValidateVolumeName(spec.name));
  if (spec.pool.empty()) return Status::InvalidArgument("pool is empty; name one of the node's pools");
  Backend* b = FindPool(spec.pool);
  if (!b) {
    std::string known;
    for (const auto& [n, _] : pools_) known += (known.empty() ? "" : ", ") + n;
    return Status::InvalidArgument("pool \"" + spec.pool + "\" is not configured on this node; pools: " + known);
  }
  if (spec.size_bytes == 0) return Status::InvalidArgument("size must be greater than 0 bytes");
  if (spec.size_bytes > (uint64_t{1} << 62)) return Status::InvalidArgument("size " + ExactBytes(spec.size_bytes) + " is too large");
  if (spec.block && !b->block_capable())
    return Status::InvalidArgument("raw block volumes come only from lvm pools; pool " + spec.pool + " is " + b->kind());
  if (spec.block && !spec.fs_type.empty())
    return Status::InvalidArgument("a raw block volume has no filesystem; fs_type \"" + spec.fs_type + "\" asked");
  if (!spec.from_snapshot.empty() && !spec.from_volume.empty())
    return Status::InvalidArgument("a volume is made from a snapshot or from a volume, not both (snapshot " +
                                   spec.from_snapshot + ", volume " + spec.from_volume + ")");
  if (!spec.from_snapshot.empty()) NODEVOL_RETURN_IF_ERROR(ValidateSnapshotName(spec.from_snapshot));
  if (!spec.from_volume.empty()) NODEVOL_RETURN_IF_ERROR(ValidateVolumeName(spec.from_volume));
  if (spec.from_volume == spec.name) return Status::InvalidArgument("volume " + spec.name + " cannot be made from itself");
  return b->Validate(spec);
}

Status Node::CreateVolume(const VolumeSpec& spec, VolumeView* out) {
  NODEVOL_RETURN_IF_ERROR(CheckSpec(spec));
  LockTable::Guard g(&locks_, VolumeKey(spec.name));
  NODEVOL_RETURN_IF_ERROR(g.status());
  return CreateLocked(spec, false, out);
}

Status Node::CreateLocked(const VolumeSpec& spec, bool ephemeral, VolumeView* out) {
  Backend* b = FindPool(spec.pool);
  VolumeRecord rec;
  const bool resumed = LookupVolume(spec.name, &rec);
  const bool from = !spec.from_snapshot.empty() || !spec.from_volume.empty();
  SnapshotRecord snap;
  VolumeRecord src;
  if (resumed) {
    std::string diff = SpecDifference(rec.spec, spec);
    if (!diff.empty())
      return Status::AlreadyExists("volume " + spec.name + " already exists with " + diff);
    if (rec.ephemeral != ephemeral)
      return Status::AlreadyExists("volume " + spec.name + " already exists as " +
                                   (rec.ephemeral ? "an inline ephemeral" : "a persistent") + " volume");
    if (rec.state == VolumeState::kDeleting)
      return Status::FailedPrecondition("volume " + spec.name + " is being deleted; call DeleteVolume to finish");
    if (rec.state == VolumeState::kReady) {
      *out = {rec, PublishedAt(spec.name)};
      return Status::Ok();
    }
    // kCreating: a crash or an error interrupted it; finish below.
  } else {
    Capacity cap;
    NODEVOL_RETURN_IF_ERROR(b->GetCapacity(&cap).WithContext("pool " + spec.pool));
    if (spec.size_bytes > cap.free_bytes)
      return Status::ResourceExhausted("pool " + spec.pool + " has " + ExactBytes(cap.free_bytes) + " free, " +
                                       ExactBytes(spec.size_bytes) + " asked");
    rec = VolumeRecord{spec, b->kind(), VolumeState::kCreating, ephemeral, static_cast<int64_t>(std::time(nullptr)), {}};
    if (from) {
      // Checked and recorded in one step under mu_: a delete of the source
      // that starts after this sees the create in flight (node/snapshots.cc).
      std::lock_guard<std::mutex> l(mu_);
      NODEVOL_RETURN_IF_ERROR(CheckSourceLocked(spec, &snap, &src));
      PutVolumeLocked(rec);
    }
    if (Status st = store_->PutVolume(rec); !st.ok()) {
      std::lock_guard<std::mutex> l(mu_);
      EraseVolumeLocked(spec.name);
      return st;
    }
    SaveVolumeInMemory(rec);
  }
  if (from && resumed) {
    std::lock_guard<std::mutex> l(mu_);
    NODEVOL_RETURN_IF_ERROR(CheckSourceLocked(spec, &snap, &src));
  }
  Status st = !from ? b->Create(&rec, resumed)
                    : b->CreateFrom(&rec, spec.from_snapshot.empty() ? nullptr : &snap,
                                    spec.from_volume.empty() ? nullptr : &src, resumed);
  if (!st.ok()) {
    // Nothing of a volume that never became ready is worth keeping: undo
    // what Create made, so a failed request (no room, bad device) leaves
    // nothing behind. If undoing fails too, the record stays (creating)
    // and a retry or DeleteVolume finishes the job.
    Status undo = b->Delete(rec);
    if (undo.ok()) undo = store_->RemoveVolume(spec.name);
    if (undo.ok()) {
      std::lock_guard<std::mutex> l(mu_);
      EraseVolumeLocked(spec.name);
    } else {
      spdlog::warn("volume {}: undoing its failed create failed too ({}); it stays \"creating\" for a retry or "
                   "DeleteVolume to finish",
                   spec.name, undo.message());
    }
    ++generation_;
    return st.WithContext("create volume " + spec.name + " in pool " + spec.pool);
  }
  rec.state = VolumeState::kReady;
  NODEVOL_RETURN_IF_ERROR(store_->PutVolume(rec));
  SaveVolumeInMemory(rec);
  *out = {rec, {}};
  return Status::Ok();
}

Status Node::DeleteVolume(const std::string& name, bool* existed, const std::string& shared_pool) {
  NODEVOL_RETURN_IF_ERROR(ValidateVolumeName(name));
  LockTable::Guard g(&locks_, VolumeKey(name));
  NODEVOL_RETURN_IF_ERROR(g.status());
  return DeleteLocked(name, existed, shared_pool);
}

Status Node::DeleteLocked(const std::string& name, bool* existed, const std::string& shared_pool) {
  VolumeRecord rec;
  *existed = LookupVolume(name, &rec);
  if (!*existed && !shared_pool.empty()) {
    // Made by another node (node/shared.cc): deleted from here, through a
    // copy of its record that says "deleting" until the data is gone.
    Status st = FindShared(name, shared_pool, &rec);
    if (st.code() == Status::Code::kNotFound) return Status::Ok();
    NODEVOL_RETURN_IF_ERROR(st);
    *existed = true;
  }
  if (!*existed) return Status::Ok();
  {
    std::lock_guard<std::mutex> l(mu_);
    std::string user = MadeFromLocked("", name);
    if (!user.empty())
      return Status::FailedPrecondition("volume " + user + " is being made from volume " + name +
                                        "; delete it once that create has ended");
  }
  std::vector<std::string> targets = PublishedAt(name);
  if (!targets.empty())
    return Status::FailedPrecondition("volume " + name + " is published at " + targets[0] +
                                      (targets.size() > 1 ? " and " + std::to_string(targets.size() - 1) + " more" : "") +
                                      "; unpublish it first");
  // A bind no record explains (a lost record, a bind by hand) still shows
  // the data to someone.
  if (auto path = rec.attributes.find("path"); path != rec.attributes.end())
    NODEVOL_RETURN_IF_ERROR(CheckNotBound(path->second).WithContext("volume " + name));
  Backend* b = FindPool(rec.spec.pool);
  if (!b)
    return Status::FailedPrecondition("volume " + name + " is in pool " + rec.spec.pool +
                                      ", which is no longer configured; restore the pool to delete it");
  if (rec.state != VolumeState::kDeleting) {
    rec.state = VolumeState::kDeleting;
    NODEVOL_RETURN_IF_ERROR(store_->PutVolume(rec));
    SaveVolumeInMemory(rec);
  }
  NODEVOL_RETURN_IF_ERROR(b->Delete(rec).WithContext("delete volume " + name));
  NODEVOL_RETURN_IF_ERROR(store_->RemoveVolume(name));
  {
    std::lock_guard<std::mutex> l(mu_);
    EraseVolumeLocked(name);
  }
  ++generation_;
  return Status::Ok();
}

Status Node::ExpandVolume(const std::string& name, uint64_t size_bytes, VolumeView* out,
                          const std::string& shared_pool) {
  NODEVOL_RETURN_IF_ERROR(ValidateVolumeName(name));
  LockTable::Guard g(&locks_, VolumeKey(name));
  NODEVOL_RETURN_IF_ERROR(g.status());
  VolumeRecord rec;
  // Made by another node: the backend updates the shared record; this
  // node keeps no copy for it.
  bool shared = false;
  if (!LookupVolume(name, &rec)) {
    if (shared_pool.empty()) return Status::NotFound("volume " + name + " does not exist on this node");
    NODEVOL_RETURN_IF_ERROR(FindShared(name, shared_pool, &rec));
    shared = true;
  }
  if (rec.state != VolumeState::kReady)
    return Status::FailedPrecondition("volume " + name + " is " + ToString(rec.state) + ", not ready");
  if (size_bytes < rec.spec.size_bytes)
    return Status::InvalidArgument("volume " + name + " is " + ExactBytes(rec.spec.size_bytes) +
                                   "; shrinking to " + ExactBytes(size_bytes) + " is not supported");
  if (size_bytes > rec.spec.size_bytes) {
    Backend* b = FindPool(rec.spec.pool);
    if (!b) return Status::FailedPrecondition("pool " + rec.spec.pool + " of volume " + name + " is not configured");
    if (b->size_enforced()) {
      Capacity cap;
      NODEVOL_RETURN_IF_ERROR(b->GetCapacity(&cap));
      uint64_t more = size_bytes - rec.spec.size_bytes;
      if (more > cap.free_bytes)
        return Status::ResourceExhausted("pool " + rec.spec.pool + " has " + ExactBytes(cap.free_bytes) + " free, " +
                                         ExactBytes(more) + " more asked");
    }
    NODEVOL_RETURN_IF_ERROR(b->Expand(&rec, size_bytes).WithContext("expand volume " + name));
    rec.spec.size_bytes = size_bytes;
    if (!shared) {
      NODEVOL_RETURN_IF_ERROR(store_->PutVolume(rec));
      SaveVolumeInMemory(rec);
    }
  }
  *out = {rec, PublishedAt(name)};
  return Status::Ok();
}

Status Node::GetVolume(const std::string& name, VolumeView* out, const std::string& shared_pool) {
  NODEVOL_RETURN_IF_ERROR(ValidateVolumeName(name));
  VolumeRecord rec;
  if (!LookupVolume(name, &rec)) {
    if (shared_pool.empty()) return Status::NotFound("volume " + name + " does not exist on this node");
    NODEVOL_RETURN_IF_ERROR(FindShared(name, shared_pool, &rec));
  }
  *out = {rec, PublishedAt(name)};
  return Status::Ok();
}

Status Node::ListVolumes(const std::string& pool, std::vector<VolumeView>* out, const std::string& after,
                         size_t max, bool* more) {
  if (!pool.empty() && !FindPool(pool)) return Status::NotFound("pool \"" + pool + "\" is not configured on this node");
  if (more) *more = false;
  std::lock_guard<std::mutex> l(mu_);
  size_t given = 0;
  for (auto it = after.empty() ? volumes_.begin() : volumes_.upper_bound(after); it != volumes_.end(); ++it) {
    const auto& [name, rec] = *it;
    if (!pool.empty() && rec.spec.pool != pool) continue;
    if (max && given == max) {
      if (more) *more = true;
      break;
    }
    out->push_back({rec, publications_.TargetsOf(name)});
    ++given;
  }
  return Status::Ok();
}

}  // namespace nodevol
