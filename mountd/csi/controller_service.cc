#include "csi/controller_service.h"

#include <algorithm>

#include "base/names.h"
#include "csi/capability.h"
#include "csi/driver.h"
#include "csi/find_volume.h"

namespace nodevol::csi {
namespace {

constexpr uint64_t kDefaultSize = uint64_t{1} << 30;  // a CO that asks for no size gets 1 GiB
constexpr char kFsTypeParam[] = "csi.storage.k8s.io/fstype";
constexpr char kPvcNamespaceParam[] = "csi.storage.k8s.io/pvc/namespace";
constexpr char kClaimNamespace[] = "nodevol.io/pvc-namespace";

std::string PoolNames(const std::vector<PoolView>& pools) {
  std::string s;
  for (const PoolView& p : pools) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

// Size from a capacity range: required, else limit, else the default.
Status SizeFrom(const ::csi::v1::CapacityRange& r, uint64_t* out) {
  if (r.required_bytes() < 0 || r.limit_bytes() < 0)
    return Status::InvalidArgument("capacity_range: byte counts must not be negative");
  if (r.limit_bytes() && r.required_bytes() > r.limit_bytes())
    return Status::InvalidArgument("capacity_range: required_bytes is above limit_bytes");
  *out = r.required_bytes() ? r.required_bytes() : r.limit_bytes() ? r.limit_bytes() : kDefaultSize;
  return Status::Ok();
}

bool InRange(uint64_t size, const ::csi::v1::CapacityRange& r) {
  return size >= static_cast<uint64_t>(r.required_bytes()) &&
         (!r.limit_bytes() || size <= static_cast<uint64_t>(r.limit_bytes()));
}

void Answer(const VolumeView& v, const std::string& node, ::csi::v1::Volume* out) {
  out->set_volume_id(v.record.spec.name);
  if (!v.record.spec.from_snapshot.empty())
    out->mutable_content_source()->mutable_snapshot()->set_snapshot_id(v.record.spec.from_snapshot);
  if (!v.record.spec.from_volume.empty())
    out->mutable_content_source()->mutable_volume()->set_volume_id(v.record.spec.from_volume);
  out->set_capacity_bytes(static_cast<int64_t>(v.record.spec.size_bytes));
  (*out->mutable_volume_context())[kPoolKey] = v.record.spec.pool;
  (*out->add_accessible_topology()->mutable_segments())[kTopologyKey] = node;
}

// A content source as CSI wants it checked: NOT_FOUND when it is not
// here, OUT_OF_RANGE when the size asked cannot hold it. Without a size
// asked, the volume is the source's size.
Status CheckContentSource(nodevol::Node* node, VolumeSpec* spec, const ::csi::v1::CapacityRange& range) {
  uint64_t size = 0;
  if (!spec->from_snapshot.empty()) {
    SnapshotRecord s;
    if (!ValidateSnapshotName(spec->from_snapshot).ok() || !node->GetSnapshot(spec->from_snapshot, &s).ok())
      return Status::NotFound("snapshot " + spec->from_snapshot + " does not exist on this node");
    size = s.size_bytes;
    if (s.block) spec->block = true;
  } else {
    VolumeView v;
    if (!ValidateVolumeName(spec->from_volume).ok() || !node->GetVolume(spec->from_volume, &v).ok())
      return Status::NotFound("volume " + spec->from_volume + " does not exist on this node");
    size = v.record.spec.size_bytes;
  }
  if (range.required_bytes() == 0 && range.limit_bytes() == 0) spec->size_bytes = size;
  if (spec->size_bytes < size) {
    if (range.limit_bytes() && static_cast<uint64_t>(range.limit_bytes()) < size)
      return Status::OutOfRange("the source is " + std::to_string(size) + " bytes, above limit_bytes");
    spec->size_bytes = size;
  }
  return Status::Ok();
}

}  // namespace

ControllerService::ControllerService(nodevol::Node* node, CapacityMonitor* capacity, CallRunner* calls,
                                     std::string node_name)
    : node_(node), capacity_(capacity), calls_(calls), node_name_(std::move(node_name)) {}

Status ControllerService::PoolOf(const google::protobuf::Map<std::string, std::string>& parameters,
                                 PoolView* out) const {
  std::vector<PoolView> pools = node_->Pools();
  auto it = parameters.find(kPoolKey);
  if (it == parameters.end() || it->second.empty())
    return Status::InvalidArgument("parameters.pool is required: name one of this node's pools (" +
                                   PoolNames(pools) + ")");
  for (const PoolView& p : pools)
    if (p.name == it->second) {
      *out = p;
      return Status::Ok();
    }
  return Status::InvalidArgument("parameters.pool \"" + it->second + "\" is not configured on node " + node_name_ +
                                 "; its pools: " + PoolNames(pools));
}

bool ControllerService::Admits(const ::csi::v1::TopologyRequirement& req) const {
  if (req.requisite().empty()) return true;
  for (const ::csi::v1::Topology& t : req.requisite()) {
    auto it = t.segments().find(kTopologyKey);
    if (it == t.segments().end() || it->second == node_name_) return true;
  }
  return false;
}

grpc::Status ControllerService::CreateVolume(grpc::ServerContext* ctx, const ::csi::v1::CreateVolumeRequest* req,
                                             ::csi::v1::CreateVolumeResponse* resp) {
  return calls_->RunJoined(ctx, "csi.CreateVolume", req->name(), "", *req, resp, [&] {
    if (req->name().empty()) return Status::InvalidArgument("name is required");
    if (req->volume_capabilities().empty()) return Status::InvalidArgument("volume_capabilities are required");
    PoolView pool;
    NODEVOL_RETURN_IF_ERROR(PoolOf(req->parameters(), &pool));
    VolumeSpec spec{req->name(), pool.name, 0, "", {}};
    NODEVOL_RETURN_IF_ERROR(SizeFrom(req->capacity_range(), &spec.size_bytes));
    if (req->has_volume_content_source()) {
      const auto& src = req->volume_content_source();
      if (src.has_snapshot()) spec.from_snapshot = src.snapshot().snapshot_id();
      else if (src.has_volume()) spec.from_volume = src.volume().volume_id();
      else return Status::InvalidArgument("volume_content_source names neither a snapshot nor a volume");
      if (spec.from_snapshot.empty() && spec.from_volume.empty())
        return Status::InvalidArgument("volume_content_source: the snapshot or volume id is empty");
      NODEVOL_RETURN_IF_ERROR(CheckContentSource(node_, &spec, req->capacity_range()));
    }
    for (const auto& cap : req->volume_capabilities()) {
      Access a;
      NODEVOL_RETURN_IF_ERROR(ParseCapability(cap, &a));
      if (std::string why = Unsupported(pool.backend, cap); !why.empty()) return Status::InvalidArgument(why);
      if (!a.fs_type.empty()) spec.fs_type = a.fs_type;
      spec.block |= a.block;
    }
    if (spec.block && req->volume_capabilities().size() > 1)
      for (const auto& cap : req->volume_capabilities())
        if (cap.has_mount())
          return Status::InvalidArgument("a volume is either raw block or a filesystem; both were asked");
    for (const auto& [k, v] : req->parameters()) {
      if (k == kPoolKey) continue;
      if (k == kFsTypeParam || k == kFsTypeKey) spec.fs_type = v;
      else if (k == kPvcNamespaceParam) spec.parameters[kClaimNamespace] = v;
      else if (k.rfind(kReservedPrefix, 0) != 0) spec.parameters[k] = v;
    }
    if (req->has_accessibility_requirements() && !Admits(req->accessibility_requirements()))
      return Status::ResourceExhausted("the topology asked for does not include node " + node_name_ +
                                       ", the only one this controller makes volumes on");
    // The same name again: fine if what exists satisfies the request (a
    // retry, or one after an expansion).
    VolumeView v;
    if (ValidateVolumeName(spec.name).ok() && node_->GetVolume(spec.name, &v).ok() &&
        v.record.state == VolumeState::kReady && !v.record.ephemeral &&
        SpecDifference(v.record.spec, spec, /*compare_size=*/false).empty()) {
      if (!InRange(v.record.spec.size_bytes, req->capacity_range()))
        return Status::AlreadyExists("volume " + spec.name + " exists with " +
                                     std::to_string(v.record.spec.size_bytes) + " bytes, outside the range asked");
      Answer(v, node_name_, resp->mutable_volume());
      return Status::Ok();
    }
    NODEVOL_RETURN_IF_ERROR(node_->CreateVolume(spec, &v));
    capacity_->Poke();
    Answer(v, node_name_, resp->mutable_volume());
    return Status::Ok();
  });
}

grpc::Status ControllerService::DeleteVolume(grpc::ServerContext* ctx, const ::csi::v1::DeleteVolumeRequest* req,
                                             ::csi::v1::DeleteVolumeResponse* resp) {
  return calls_->RunJoined(ctx, "csi.DeleteVolume", req->volume_id(), "", *req, resp, [&] {
    if (req->volume_id().empty()) return Status::InvalidArgument("volume_id is required");
    // An id that is no volume name was never ours: nothing to delete.
    if (!ValidateVolumeName(req->volume_id()).ok()) return Status::Ok();
    bool existed = false;
    NODEVOL_RETURN_IF_ERROR(node_->DeleteVolume(req->volume_id(), &existed));
    if (existed) capacity_->Poke();
    return Status::Ok();
  });
}

grpc::Status ControllerService::ControllerExpandVolume(grpc::ServerContext* ctx,
                                                       const ::csi::v1::ControllerExpandVolumeRequest* req,
                                                       ::csi::v1::ControllerExpandVolumeResponse* resp) {
  return calls_->RunJoined(ctx, "csi.ControllerExpandVolume", req->volume_id(), "", *req, resp, [&] {
    if (req->volume_id().empty()) return Status::InvalidArgument("volume_id is required");
    if (!req->has_capacity_range()) return Status::InvalidArgument("capacity_range is required");
    uint64_t size = 0;
    NODEVOL_RETURN_IF_ERROR(SizeFrom(req->capacity_range(), &size));
    VolumeView v;
    NODEVOL_RETURN_IF_ERROR(FindVolume(node_, req->volume_id(), &v));
    // Never shrinks: a volume already as big is a success (CSI's rule).
    if (size > v.record.spec.size_bytes) {
      NODEVOL_RETURN_IF_ERROR(node_->ExpandVolume(req->volume_id(), size, &v));
      capacity_->Poke();
    }
    resp->set_capacity_bytes(static_cast<int64_t>(v.record.spec.size_bytes));
    // The filesystem grew with the volume (online where it is mounted).
    resp->set_node_expansion_required(false);
    return Status::Ok();
  });
}

grpc::Status ControllerService::ValidateVolumeCapabilities(grpc::ServerContext* ctx,
                                                           const ::csi::v1::ValidateVolumeCapabilitiesRequest* req,
                                                           ::csi::v1::ValidateVolumeCapabilitiesResponse* resp) {
  return calls_->Run(ctx, "csi.ValidateVolumeCapabilities", req->volume_id(), "", [&] {
    if (req->volume_id().empty()) return Status::InvalidArgument("volume_id is required");
    if (req->volume_capabilities().empty()) return Status::InvalidArgument("volume_capabilities are required");
    VolumeView v;
    NODEVOL_RETURN_IF_ERROR(FindVolume(node_, req->volume_id(), &v));
    for (const auto& cap : req->volume_capabilities()) {
      Access a;
      NODEVOL_RETURN_IF_ERROR(ParseCapability(cap, &a));
      std::string why = Unsupported(v.record.backend, cap);
      if (why.empty() && a.block != v.record.spec.block)
        why = v.record.spec.block ? "volume " + v.record.spec.name + " is raw block, not a filesystem"
                                  : "volume " + v.record.spec.name + " is a filesystem, not raw block";
      if (why.empty() && !a.fs_type.empty() && !v.record.spec.fs_type.empty() && a.fs_type != v.record.spec.fs_type)
        why = "volume " + v.record.spec.name + " has filesystem " + v.record.spec.fs_type + ", not " + a.fs_type;
      if (!why.empty()) {
        resp->set_message(why);
        return Status::Ok();
      }
    }
    auto* c = resp->mutable_confirmed();
    *c->mutable_volume_capabilities() = req->volume_capabilities();
    *c->mutable_volume_context() = req->volume_context();
    *c->mutable_parameters() = req->parameters();
    return Status::Ok();
  });
}

grpc::Status ControllerService::GetCapacity(grpc::ServerContext* ctx, const ::csi::v1::GetCapacityRequest* req,
                                            ::csi::v1::GetCapacityResponse* resp) {
  return calls_->Run(ctx, "csi.GetCapacity", "", "", [&] {
    if (req->has_accessible_topology()) {
      auto it = req->accessible_topology().segments().find(kTopologyKey);
      if (it != req->accessible_topology().segments().end() && it->second != node_name_) return Status::Ok();
    }
    // Without a pool: the most one volume can get on this node (volumes
    // do not span pools).
    std::string pool;
    if (auto it = req->parameters().find(kPoolKey); it != req->parameters().end()) {
      PoolView p;
      NODEVOL_RETURN_IF_ERROR(PoolOf(req->parameters(), &p));
      pool = p.name;
    }
    std::vector<PoolCapacityView> pools;
    NODEVOL_RETURN_IF_ERROR(node_->GetCapacity(pool, &pools));
    uint64_t best = 0;
    for (const PoolCapacityView& p : pools) best = std::max(best, p.free_bytes);
    resp->set_available_capacity(static_cast<int64_t>(best));
    resp->mutable_maximum_volume_size()->set_value(static_cast<int64_t>(best));
    return Status::Ok();
  });
}

grpc::Status ControllerService::ListVolumes(grpc::ServerContext* ctx, const ::csi::v1::ListVolumesRequest* req,
                                            ::csi::v1::ListVolumesResponse* resp) {
  return calls_->Run(ctx, "csi.ListVolumes", "", "", [&] {
    if (req->max_entries() < 0) return Status::InvalidArgument("max_entries must not be negative");
    std::string after;
    if (!req->starting_token().empty()) {
      const std::string& t = req->starting_token();
      if (t.rfind("n:", 0) != 0 || !ValidateVolumeName(t.substr(2)).ok())
        return Status::Aborted("starting_token \"" + t + "\" is not one this driver gave; list from the start");
      after = t.substr(2);
    }
    std::vector<VolumeView> vols;
    NODEVOL_RETURN_IF_ERROR(node_->ListVolumes("", &vols));
    std::sort(vols.begin(), vols.end(),
              [](const VolumeView& a, const VolumeView& b) { return a.record.spec.name < b.record.spec.name; });
    for (const VolumeView& v : vols) {
      const VolumeRecord& r = v.record;
      // Only what CreateVolume could have made here: no inline volume, no
      // copy of another node's record, nothing half made.
      if (r.ephemeral || r.shared_copy || r.state != VolumeState::kReady || r.spec.name <= after) continue;
      if (req->max_entries() && resp->entries_size() == req->max_entries()) {
        resp->set_next_token("n:" + resp->entries(resp->entries_size() - 1).volume().volume_id());
        break;
      }
      Answer(v, node_name_, resp->add_entries()->mutable_volume());
    }
    return Status::Ok();
  });
}

grpc::Status ControllerService::ControllerGetCapabilities(grpc::ServerContext* ctx,
                                                          const ::csi::v1::ControllerGetCapabilitiesRequest*,
                                                          ::csi::v1::ControllerGetCapabilitiesResponse* resp) {
  using Rpc = ::csi::v1::ControllerServiceCapability::RPC;
  for (Rpc::Type t : {Rpc::CREATE_DELETE_VOLUME, Rpc::EXPAND_VOLUME, Rpc::GET_CAPACITY, Rpc::LIST_VOLUMES})
    resp->add_capabilities()->mutable_rpc()->set_type(t);
  if (AnyPoolSnapshots())
    for (Rpc::Type t : {Rpc::CREATE_DELETE_SNAPSHOT, Rpc::LIST_SNAPSHOTS, Rpc::CLONE_VOLUME})
      resp->add_capabilities()->mutable_rpc()->set_type(t);
  return grpc::Status::OK;
}

}  // namespace nodevol::csi
