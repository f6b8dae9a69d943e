// ControllerService: CSI snapshots over the node's snapshots
// (node/snapshots.cc). snapshot_id is the snapshot's name; a snapshot is
// ready when CreateSnapshot answers (a thin snapshot is made at once).
#include <algorithm>

#include "base/names.h"
#include "csi/controller_service.h"
#include "csi/find_volume.h"

namespace nodevol::csi {
namespace {

void Answer(const SnapshotRecord& s, ::csi::v1::Snapshot* out) {
  out->set_snapshot_id(s.name);
  out->set_source_volume_id(s.source);
  out->set_size_bytes(static_cast<int64_t>(s.size_bytes));
  out->mutable_creation_time()->set_seconds(s.created_unix);
  out->set_ready_to_use(s.state == VolumeState::kReady);
}

}  // namespace

bool ControllerService::AnyPoolSnapshots() const {
  for (const PoolView& p : node_->Pools())
    if (p.snapshots) return true;
  return false;
}

grpc::Status ControllerService::CreateSnapshot(grpc::ServerContext* ctx, const ::csi::v1::CreateSnapshotRequest* req,
                                               ::csi::v1::CreateSnapshotResponse* resp) {
  return calls_->RunJoined(ctx, "csi.CreateSnapshot", req->source_volume_id(), "", *req, resp, [&] {
    if (req->name().empty()) return Status::InvalidArgument("name is required");
    if (req->source_volume_id().empty()) return Status::InvalidArgument("source_volume_id is required");
    NODEVOL_RETURN_IF_ERROR(ValidateSnapshotName(req->name()));
    VolumeView v;
    NODEVOL_RETURN_IF_ERROR(FindVolume(node_, req->source_volume_id(), &v));
    SnapshotRecord s;
    NODEVOL_RETURN_IF_ERROR(node_->CreateSnapshot(req->name(), req->source_volume_id(), &s));
    capacity_->Poke();
    Answer(s, resp->mutable_snapshot());
    return Status::Ok();
  });
}

grpc::Status ControllerService::DeleteSnapshot(grpc::ServerContext* ctx, const ::csi::v1::DeleteSnapshotRequest* req,
                                               ::csi::v1::DeleteSnapshotResponse* resp) {
  return calls_->RunJoined(ctx, "csi.DeleteSnapshot", "", "", *req, resp, [&] {
    if (req->snapshot_id().empty()) return Status::InvalidArgument("snapshot_id is required");
    // An id that is no snapshot name was never ours: nothing to delete.
    if (!ValidateSnapshotName(req->snapshot_id()).ok()) return Status::Ok();
    bool existed = false;
    NODEVOL_RETURN_IF_ERROR(node_->DeleteSnapshot(req->snapshot_id(), &existed));
    if (existed) capacity_->Poke();
    return Status::Ok();
  });
}

grpc::Status ControllerService::ListSnapshots(grpc::ServerContext* ctx, const ::csi::v1::ListSnapshotsRequest* req,
                                              ::csi::v1::ListSnapshotsResponse* resp) {
  return calls_->Run(ctx, "csi.ListSnapshots", req->source_volume_id(), "", [&] {
    if (req->max_entries() < 0) return Status::InvalidArgument("max_entries must not be negative");
    std::string after;
    if (!req->starting_token().empty()) {
      const std::string& t = req->starting_token();
      if (t.rfind("s:", 0) != 0 || !ValidateSnapshotName(t.substr(2)).ok())
        return Status::Aborted("starting_token \"" + t + "\" is not one this driver gave; list from the start");
      after = t.substr(2);
    }
    // Ids that cannot be ours match nothing (an empty list, not an error).
    if (!req->snapshot_id().empty() && !ValidateSnapshotName(req->snapshot_id()).ok()) return Status::Ok();
    if (!req->source_volume_id().empty() && !ValidateVolumeName(req->source_volume_id()).ok()) return Status::Ok();
    std::vector<SnapshotRecord> snaps;
    NODEVOL_RETURN_IF_ERROR(node_->ListSnapshots(req->source_volume_id(), &snaps));
    std::sort(snaps.begin(), snaps.end(), [](const SnapshotRecord& a, const SnapshotRecord& b) { return a.name < b.name; });
    for (const SnapshotRecord& s : snaps) {
      if (s.state != VolumeState::kReady || s.name <= after) continue;
      if (!req->snapshot_id().empty() && s.name != req->snapshot_id()) continue;
      if (req->max_entries() && resp->entries_size() == req->max_entries()) {
        resp->set_next_token("s:" + resp->entries(resp->entries_size() - 1).snapshot().snapshot_id());
        break;
      }
      Answer(s, resp->add_entries()->mutable_snapshot());
    }
    return Status::Ok();
  });
}

}  // namespace nodevol::csi
