#include "csi/node_service.h"

#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <memory>

#include "base/names.h"
#include "base/parse.h"
#include "base/size.h"
#include "csi/capability.h"
#include "csi/driver.h"
#include "csi/find_volume.h"

namespace nodevol::csi {
namespace {

std::string Get(const google::protobuf::Map<std::string, std::string>& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() ? "" : it->second;
}

// The path as the domain records it (symlinks resolved), or "" when it
// does not exist.
std::string Resolved(const std::string& path) {
  std::unique_ptr<char, decltype(&free)> r(::realpath(path.c_str(), nullptr), &free);
  return r ? std::string(r.get()) : "";
}

// An inline volume's spec from what the pod author wrote in
// volumeAttributes: pool, size and fsType; anything else but kubelet's own
// keys goes to the domain, which takes only mode (node/access.cc).
Status InlineFrom(const google::protobuf::Map<std::string, std::string>& ctx, const std::string& cap_fs,
                  InlineSpec* out) {
  out->pool = Get(ctx, kPoolKey);
  if (out->pool.empty()) return Status::InvalidArgument("inline volume: volumeAttributes.pool is required");
  std::string size = Get(ctx, kSizeKey);
  if (size.empty()) return Status::InvalidArgument("inline volume: volumeAttributes.size is required, e.g. 1Gi");
  std::optional<uint64_t> bytes = ParseSize(size);
  if (!bytes)
    return Status::InvalidArgument("inline volume: volumeAttributes.size \"" + size + "\": " + std::string(kSizeForms));
  out->size_bytes = *bytes;
  out->fs_type = Get(ctx, kFsTypeKey);
  if (out->fs_type.empty()) out->fs_type = cap_fs;
  for (const auto& [k, v] : ctx) {
    if (k == kPoolKey || k == kSizeKey || k == kFsTypeKey || k.rfind(kReservedPrefix, 0) == 0) continue;
    out->parameters[k] = v;
  }
  return Status::Ok();
}

}  // namespace

NodeService::NodeService(nodevol::Node* node, CapacityMonitor* capacity, CallRunner* calls, std::string node_name)
    : node_(node), capacity_(capacity), calls_(calls), node_name_(std::move(node_name)) {}

grpc::Status NodeService::NodePublishVolume(grpc::ServerContext* ctx, const ::csi::v1::NodePublishVolumeRequest* req,
                                            ::csi::v1::NodePublishVolumeResponse* resp) {
  const auto& vc = req->volume_context();
  bool ephemeral = Get(vc, kEphemeral) == "true";
  return calls_->RunJoined(ctx, "csi.NodePublishVolume", ephemeral ? "(inline)" : req->volume_id(), req->target_path(),
                           *req, resp, [&] {
    if (req->volume_id().empty()) return Status::InvalidArgument("volume_id is required");
    if (req->target_path().empty()) return Status::InvalidArgument("target_path is required");
    if (!req->has_volume_capability()) return Status::InvalidArgument("volume_capability is required");
    Access access;
    NODEVOL_RETURN_IF_ERROR(ParseCapability(req->volume_capability(), &access));
    PublishArgs a;
    a.block = access.block;
    if (access.block && ephemeral)
      return Status::InvalidArgument("inline volumes are filesystems; raw block needs a PersistentVolumeClaim");
    if (ephemeral) {
      InlineSpec spec;
      NODEVOL_RETURN_IF_ERROR(InlineFrom(vc, access.fs_type, &spec));
      a.inline_spec = spec;
    } else {
      a.volume = req->volume_id();
      a.pool = Get(vc, kPoolKey);
    }
    a.target = req->target_path();
    a.read_only = req->readonly() || access.read_only;
    a.mount_options = access.mount_flags;
    const std::string& group = req->volume_capability().mount().volume_mount_group();
    if (!group.empty()) {
      uint64_t gid = 0;
      if (!ParseUint("volume_mount_group", group, UINT32_MAX, &gid).ok())
        return Status::InvalidArgument("volume_mount_group \"" + group + "\" is not a numeric group ID");
      a.fs_group = static_cast<uint32_t>(gid);
    }
    a.pod = {Get(vc, kPodUid), Get(vc, kPodName), Get(vc, kPodNamespace), Get(vc, kServiceAccount)};
    a.pod_required = true;
    a.deadline = ctx->deadline();
    std::string volume, target;
    Status st = node_->Publish(a, &volume, &target);
    if (a.inline_spec && st.ok()) capacity_->Poke();
    return st;
  });
}

grpc::Status NodeService::NodeUnpublishVolume(grpc::ServerContext* ctx, const ::csi::v1::NodeUnpublishVolumeRequest* req,
                                              ::csi::v1::NodeUnpublishVolumeResponse* resp) {
  return calls_->RunJoined(ctx, "csi.NodeUnpublishVolume", req->volume_id(), req->target_path(), *req, resp, [&] {
    if (req->volume_id().empty()) return Status::InvalidArgument("volume_id is required");
    if (req->target_path().empty()) return Status::InvalidArgument("target_path is required");
    // Only the volume named goes: whatever else is at the target is not
    // this call's to remove.
    UnpublishOf of;
    of.volume = req->volume_id();
    of.inline_volume = IsInlineVolumeId(req->volume_id());
    bool was = false;
    NODEVOL_RETURN_IF_ERROR(node_->Unpublish(req->target_path(), &was, of));
    if (was) capacity_->Poke();
    return Status::Ok();
  });
}

grpc::Status NodeService::NodeGetVolumeStats(grpc::ServerContext* ctx, const ::csi::v1::NodeGetVolumeStatsRequest* req,
                                             ::csi::v1::NodeGetVolumeStatsResponse* resp) {
  return calls_->Run(ctx, "csi.NodeGetVolumeStats", req->volume_id(), req->volume_path(), [&] {
    if (req->volume_id().empty()) return Status::InvalidArgument("volume_id is required");
    if (req->volume_path().empty()) return Status::InvalidArgument("volume_path is required");
    // An inline volume's id is kubelet's, not the domain's name: it is
    // found by its path alone.
    // (A PV's handle may look like one: a volume of that name is the PV's.)
    VolumeView v;
    bool inline_id = IsInlineVolumeId(req->volume_id()) && !FindVolume(node_, req->volume_id(), &v).ok();
    if (!inline_id) NODEVOL_RETURN_IF_ERROR(FindVolume(node_, req->volume_id(), &v));
    std::string path = Resolved(req->volume_path());
    bool here = !path.empty() && (inline_id || std::find(v.published_at.begin(), v.published_at.end(), path) !=
                                                   v.published_at.end());
    if (!here) return Status::NotFound("volume " + req->volume_id() + " is not published at " + req->volume_path());
    if (v.record.spec.block) {
      // A device has no free space to report: its size is all there is.
      auto* bytes = resp->add_usage();
      bytes->set_unit(::csi::v1::VolumeUsage::BYTES);
      bytes->set_total(static_cast<int64_t>(v.record.spec.size_bytes));
      return Status::Ok();
    }
    VolumeStats s;
    NODEVOL_RETURN_IF_ERROR(node_->GetVolumeStats(path, &s));
    // An inline id names no domain volume: what is published at the path
    // must at least be an inline volume, not any claim's.
    if (inline_id) {
      VolumeView at;
      if (!FindVolume(node_, s.volume, &at).ok() || !at.record.ephemeral)
        return Status::NotFound("no inline volume is published at " + req->volume_path() + " (volume_id " +
                                req->volume_id() + " is an inline volume's)");
    }
    auto* bytes = resp->add_usage();
    bytes->set_unit(::csi::v1::VolumeUsage::BYTES);
    bytes->set_total(s.total_bytes);
    bytes->set_used(s.used_bytes);
    bytes->set_available(s.available_bytes);
    auto* inodes = resp->add_usage();
    inodes->set_unit(::csi::v1::VolumeUsage::INODES);
    inodes->set_total(s.total_inodes);
    inodes->set_used(s.used_inodes);
    inodes->set_available(s.free_inodes);
    return Status::Ok();
  });
}

grpc::Status NodeService::NodeExpandVolume(grpc::ServerContext* ctx, const ::csi::v1::NodeExpandVolumeRequest* req,
                                           ::csi::v1::NodeExpandVolumeResponse* resp) {
  return calls_->RunJoined(ctx, "csi.NodeExpandVolume", req->volume_id(), req->volume_path(), *req, resp, [&] {
    if (req->volume_id().empty()) return Status::InvalidArgument("volume_id is required");
    VolumeView v;
    NODEVOL_RETURN_IF_ERROR(FindVolume(node_, req->volume_id(), &v));
    if (req->volume_path().empty()) return Status::InvalidArgument("volume_path is required");
    if (req->capacity_range().required_bytes() < 0 || req->capacity_range().limit_bytes() < 0)
      return Status::InvalidArgument("capacity_range: required_bytes and limit_bytes may not be negative");
    // The spec's volume_path is where the volume is published: NOT_FOUND
    // when it is not there, rather than growing whatever the id names.
    // (A raw block volume's: kubelet has passed the device or its global
    // map path, not the publish file; the LV grew already anyway.)
    std::string path = Resolved(req->volume_path());
    if (!v.record.spec.block &&
        (path.empty() || std::find(v.published_at.begin(), v.published_at.end(), path) == v.published_at.end()))
      return Status::NotFound("volume " + req->volume_id() + " is not published at " + req->volume_path());
    uint64_t want = static_cast<uint64_t>(req->capacity_range().required_bytes());
    if (req->capacity_range().limit_bytes() && want > static_cast<uint64_t>(req->capacity_range().limit_bytes()))
      return Status::InvalidArgument("capacity_range: required_bytes is above limit_bytes");
    // The volume grows, filesystem included, online: the backend grows the
    // filesystem where it is mounted (lvm), or the quota (dir).
    if (want > v.record.spec.size_bytes) {
      NODEVOL_RETURN_IF_ERROR(node_->ExpandVolume(req->volume_id(), want, &v));
      capacity_->Poke();
    }
    resp->set_capacity_bytes(static_cast<int64_t>(v.record.spec.size_bytes));
    return Status::Ok();
  });
}

grpc::Status NodeService::NodeGetCapabilities(grpc::ServerContext* ctx, const ::csi::v1::NodeGetCapabilitiesRequest*,
                                              ::csi::v1::NodeGetCapabilitiesResponse* resp) {
  using Rpc = ::csi::v1::NodeServiceCapability::RPC;
  for (Rpc::Type t : {Rpc::GET_VOLUME_STATS, Rpc::EXPAND_VOLUME, Rpc::VOLUME_MOUNT_GROUP})
    resp->add_capabilities()->mutable_rpc()->set_type(t);
  return grpc::Status::OK;
}

grpc::Status NodeService::NodeGetInfo(grpc::ServerContext* ctx, const ::csi::v1::NodeGetInfoRequest*,
                                      ::csi::v1::NodeGetInfoResponse* resp) {
  return calls_->Run(ctx, "csi.NodeGetInfo", "", "", [&] {
    resp->set_node_id(node_name_);
    // 0: no limit of its own; a pool's room is what limits volumes.
    resp->set_max_volumes_per_node(0);
    (*resp->mutable_accessible_topology()->mutable_segments())[kTopologyKey] = node_name_;
    return Status::Ok();
  });
}

}  // namespace nodevol::csi
