// Node: volumes another node made in storage this one shares with it (an
// NFS pool's export, issue 26 item 5). Such a volume has no record here;
// its creator keeps one on the shared storage (Backend::FindShared).
//
// - Publish of a volume this node does not know looks for it there (in the
//   pool the PV names, or in every pool) and keeps a copy of the record
//   (VolumeRecord::shared_copy) for as long as it publishes the volume:
//   reconcile and unpublish need it. The pod is checked against the copy
//   like against any record (node/access.cc) before anything is written.
// - The last unpublish drops the copy; so does a start that finds a copy
//   with no publication (a crash between the two).
// - GetVolume, ExpandVolume and DeleteVolume look there only when the
//   caller names the pool (the provisioner, for NFS PVs): a node with an
//   NFS pool must not need its server to answer for its local volumes.
#include <spdlog/spdlog.h>

#include "base/names.h"
#include "node/node.h"

namespace nodevol {

Status Node::FindShared(const std::string& name, const std::string& pool, VolumeRecord* out) const {
  // The pool comes from a pod's flexVolume options too.
  if (!pool.empty()) NODEVOL_RETURN_IF_ERROR(ValidatePoolName(pool).WithContext("option pool"));
  Status first_error;
  bool looked = false;
  std::string found_in;
  for (const auto& [pool_name, b] : pools_) {
    if (!pool.empty() && pool_name != pool) continue;
    VolumeRecord rec;
    Status st = b->FindShared(name, &rec);
    if (st.ok()) {
      // Without the pool named, two exports holding a record of one name
      // leave it to chance which answers (issue 69 item 9).
      if (!found_in.empty())
        return Status::FailedPrecondition("volume " + name + " has a record on the exports of pools " + found_in +
                                          " and " + pool_name + ": name the pool (the PV's flexVolume option pool)");
      found_in = pool_name;
      *out = std::move(rec);
      continue;
    }
    if (st.code() == Status::Code::kNotFound) {
      looked |= b->kind() == "nfs";
      continue;
    }
    if (first_error.ok()) first_error = st.WithContext("pool " + pool_name);
  }
  if (!found_in.empty()) return Status::Ok();
  if (!first_error.ok()) return first_error;
  if (!pool.empty() && !FindPool(pool))
    return Status::NotFound("volume " + name + " does not exist on this node, whose pools do not include " + pool);
  return Status::NotFound("volume " + name + " does not exist on this node" +
                          (looked ? std::string(", nor on the export of its NFS pools") : ""));
}

void Node::DropSharedCopy(const std::string& name) {
  VolumeRecord rec;
  if (!LookupVolume(name, &rec) || !rec.shared_copy || !PublishedAt(name).empty() ||
      rec.state != VolumeState::kReady)
    return;
  if (Status st = store_->RemoveVolume(name); !st.ok()) {
    // Harmless: a start drops it (reconcile.cc).
    spdlog::warn("volume {}: dropping this node's copy of its record: {}", name, st.message());
    return;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    EraseVolumeLocked(name);
  }
  ++generation_;
}

}  // namespace nodevol
