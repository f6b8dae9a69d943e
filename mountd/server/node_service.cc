#include "server/node_service.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <thread>

#include "backend/registry.h"
#include "base/names.h"
#include "base/version.h"

namespace nodevol {
namespace {

using Clock = std::chrono::steady_clock;

v1::VolumeState ToProto(VolumeState s) {
  switch (s) {
    case VolumeState::kCreating: return v1::VOLUME_STATE_CREATING;
    case VolumeState::kReady: return v1::VOLUME_STATE_READY;
    case VolumeState::kDeleting: return v1::VOLUME_STATE_DELETING;
  }
  return v1::VOLUME_STATE_UNSPECIFIED;
}

void ToProto(const VolumeView& v, v1::Volume* out) {
  const VolumeRecord& r = v.record;
  out->set_name(r.spec.name);
  out->set_pool(r.spec.pool);
  out->set_backend(r.backend);
  out->set_size_bytes(r.spec.size_bytes);
  out->set_fs_type(r.spec.fs_type);
  out->mutable_parameters()->insert(r.spec.parameters.begin(), r.spec.parameters.end());
  out->set_state(ToProto(r.state));
  out->set_ephemeral(r.ephemeral);
  for (const std::string& t : v.published_at) out->add_published_at(t);
  out->set_created_unix(r.created_unix);
  out->mutable_attributes()->insert(r.attributes.begin(), r.attributes.end());
  out->set_block(r.spec.block);
  out->set_from_snapshot(r.spec.from_snapshot);
  out->set_from_volume(r.spec.from_volume);
}

void ToProto(const SnapshotRecord& r, v1::Snapshot* out) {
  out->set_name(r.name);
  out->set_source_volume(r.source);
  out->set_pool(r.pool);
  out->set_backend(r.backend);
  out->set_size_bytes(r.size_bytes);
  out->set_fs_type(r.fs_type);
  out->set_block(r.block);
  out->set_state(ToProto(r.state));
  out->set_created_unix(r.created_unix);
  out->mutable_attributes()->insert(r.attributes.begin(), r.attributes.end());
}

Params ToParams(const google::protobuf::Map<std::string, std::string>& m) { return Params(m.begin(), m.end()); }

void ToProto(const std::vector<PoolCapacityView>& pools, v1::GetCapacityResponse* out) {
  for (const PoolCapacityView& p : pools) {
    v1::PoolCapacity* c = out->add_pools();
    c->set_pool(p.pool);
    c->set_total_bytes(p.total_bytes);
    c->set_free_bytes(p.free_bytes);
    c->set_allocated_bytes(p.allocated_bytes);
    c->set_volume_count(p.volume_count);
    c->set_snapshot_count(p.snapshot_count);
  }
  out->set_observed_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch())
                                .count());
}

}  // namespace

NodeService::NodeService(Node* node, CapacityMonitor* capacity, metrics::Registry* metrics, std::string node_name,
                         unsigned default_heartbeat_seconds, Listener listener)
    : node_(node), capacity_(capacity), node_name_(std::move(node_name)),
      heartbeat_seconds_(default_heartbeat_seconds), listener_(listener),
      calls_(metrics, listener == Listener::kRemote ? "tcp" : listener == Listener::kFlex ? "flex" : "") {}

Status NodeService::LocalOnly(const char* method) const {
  if (listener_ != Listener::kRemote) return Status::Ok();
  return Status::PermissionDenied(std::string(method) +
                                  " is only served on nodevold's local unix socket, not over TCP: what is mounted "
                                  "under kubelet's pods directory is decided on the node");
}

template <typename Fn>
grpc::Status NodeService::Run(const grpc::ServerContextBase* ctx, const char* method, const std::string& volume,
                              const std::string& target, Fn fn, bool probe) {
  // nodevold's own health probe (daemon/socket_probe.h) calls every few
  // seconds: neither a metric nor an info line each time.
  return calls_.Run(ctx, method, volume, target, fn, probe);
}

bool NodeService::WaitIdle(Clock::time_point deadline) { return calls_.WaitIdle(deadline); }

grpc::Status NodeService::GetInfo(grpc::ServerContext* ctx, const v1::GetInfoRequest*, v1::GetInfoResponse* resp) {
  bool probe = listener_ == Listener::kLocal && ctx->client_metadata().count(kProbeMetadata);
  return Run(ctx, "GetInfo", "", "", [&] {
    resp->set_node_name(node_name_);
    resp->set_version(nodevol::Version());
    for (const std::string& k : BackendKinds()) resp->add_backends(k);
    for (const PoolView& p : node_->Pools()) {
      v1::PoolInfo* pi = resp->add_pools();
      pi->set_name(p.name);
      pi->set_backend(p.backend);
      for (const std::string& f : p.fs_types) pi->add_fs_types(f);
      pi->set_size_enforced(p.size_enforced);
      pi->mutable_attributes()->insert(p.attributes.begin(), p.attributes.end());
      pi->set_snapshots(p.snapshots);
    }
    for (const std::string& d : node_->Drift()) resp->add_drift(d);
    resp->add_api_versions("nodevol.v1");
    resp->set_csi_driver(csi_driver_);
    return Status::Ok();
  }, probe);
}

grpc::Status NodeService::GetCapacity(grpc::ServerContext* ctx, const v1::GetCapacityRequest* req,
                                      v1::GetCapacityResponse* resp) {
  return Run(ctx, "GetCapacity", "", "", [&] {
    std::vector<PoolCapacityView> pools;
    NODEVOL_RETURN_IF_ERROR(node_->GetCapacity(req->pool(), &pools));
    ToProto(pools, resp);
    return Status::Ok();
  });
}

grpc::Status NodeService::WatchCapacity(grpc::ServerContext* ctx, const v1::WatchCapacityRequest* req,
                                        grpc::ServerWriter<v1::GetCapacityResponse>* writer) {
  auto heartbeat = std::chrono::seconds(req->heartbeat_seconds() ? req->heartbeat_seconds() : heartbeat_seconds_);
  // Wake at least every 500 ms to notice a cancelled call or a shutdown.
  auto tick = std::min<std::chrono::milliseconds>(heartbeat, std::chrono::milliseconds(500));
  spdlog::info("WatchCapacity started peer={}", ctx->peer());
  uint64_t seen = 0;
  auto last_sent = Clock::now();
  while (!ctx->IsCancelled() && !shutting_down_) {
    std::vector<PoolCapacityView> pools;
    uint64_t sample = 0;
    uint64_t version = capacity_->Snapshot(&pools, &sample);
    bool changed = version != seen;
    if (changed || Clock::now() - last_sent >= heartbeat) {
      v1::GetCapacityResponse msg;
      ToProto(pools, &msg);
      msg.set_sample(sample);
      msg.set_heartbeat(!changed);
      if (!writer->Write(msg)) break;
      seen = version;
      last_sent = Clock::now();
    }
    if (!capacity_->WaitChange(seen, tick)) break;
  }
  spdlog::info("WatchCapacity ended peer={}", ctx->peer());
  return grpc::Status::OK;
}

grpc::Status NodeService::CreateVolume(grpc::ServerContext* ctx, const v1::CreateVolumeRequest* req,
                                       v1::CreateVolumeResponse* resp) {
  return calls_.RunJoined(ctx, "CreateVolume", req->name(), "", *req, resp, [&] {
    VolumeSpec spec{req->name(),   req->pool(),          req->size_bytes(),  req->fs_type(),
                    ToParams(req->parameters()), req->block(), req->from_snapshot(), req->from_volume()};
    VolumeView v;
    NODEVOL_RETURN_IF_ERROR(node_->CreateVolume(spec, &v));
    resp->set_capacity_sample(capacity_->Poke());
    ToProto(v, resp->mutable_volume());
    return Status::Ok();
  });
}

grpc::Status NodeService::DeleteVolume(grpc::ServerContext* ctx, const v1::DeleteVolumeRequest* req,
                                       v1::DeleteVolumeResponse* resp) {
  return calls_.RunJoined(ctx, "DeleteVolume", req->name(), "", *req, resp, [&] {
    bool existed = false;
    NODEVOL_RETURN_IF_ERROR(node_->DeleteVolume(req->name(), &existed, req->shared_pool()));
    capacity_->Poke();
    resp->set_existed(existed);
    return Status::Ok();
  });
}

grpc::Status NodeService::ExpandVolume(grpc::ServerContext* ctx, const v1::ExpandVolumeRequest* req,
                                       v1::ExpandVolumeResponse* resp) {
  return calls_.RunJoined(ctx, "ExpandVolume", req->name(), "", *req, resp, [&] {
    VolumeView v;
    NODEVOL_RETURN_IF_ERROR(node_->ExpandVolume(req->name(), req->size_bytes(), &v, req->shared_pool()));
    capacity_->Poke();
    ToProto(v, resp->mutable_volume());
    return Status::Ok();
  });
}

grpc::Status NodeService::GetVolume(grpc::ServerContext* ctx, const v1::GetVolumeRequest* req, v1::GetVolumeResponse* resp) {
  return Run(ctx, "GetVolume", req->name(), "", [&] {
    VolumeView v;
    NODEVOL_RETURN_IF_ERROR(node_->GetVolume(req->name(), &v, req->shared_pool()));
    ToProto(v, resp->mutable_volume());
    return Status::Ok();
  });
}

grpc::Status NodeService::ListVolumes(grpc::ServerContext* ctx, const v1::ListVolumesRequest* req,
                                      v1::ListVolumesResponse* resp) {
  return Run(ctx, "ListVolumes", "", "", [&] {
    // A token is "n:" and the last name of the page before.
    std::string after;
    if (const std::string& t = req->starting_token(); !t.empty()) {
      if (t.rfind("n:", 0) != 0 || !ValidateVolumeName(t.substr(2)).ok())
        return Status::InvalidArgument("starting_token \"" + t + "\" is not a next_token nodevold gave; list from "
                                       "the start (empty starting_token)");
      after = t.substr(2);
    }
    std::vector<VolumeView> vols;
    bool more = false;
    NODEVOL_RETURN_IF_ERROR(node_->ListVolumes(req->pool(), &vols, after, req->max_entries(), &more));
    for (const VolumeView& v : vols) ToProto(v, resp->add_volumes());
    if (more && !vols.empty()) resp->set_next_token("n:" + vols.back().record.spec.name);
    return Status::Ok();
  });
}

grpc::Status NodeService::CreateSnapshot(grpc::ServerContext* ctx, const v1::CreateSnapshotRequest* req,
                                         v1::CreateSnapshotResponse* resp) {
  return calls_.RunJoined(ctx, "CreateSnapshot", req->source_volume(), "", *req, resp, [&] {
    SnapshotRecord r;
    NODEVOL_RETURN_IF_ERROR(node_->CreateSnapshot(req->name(), req->source_volume(), &r));
    capacity_->Poke();
    ToProto(r, resp->mutable_snapshot());
    return Status::Ok();
  });
}

grpc::Status NodeService::DeleteSnapshot(grpc::ServerContext* ctx, const v1::DeleteSnapshotRequest* req,
                                         v1::DeleteSnapshotResponse* resp) {
  return calls_.RunJoined(ctx, "DeleteSnapshot", "", "", *req, resp, [&] {
    bool existed = false;
    NODEVOL_RETURN_IF_ERROR(node_->DeleteSnapshot(req->name(), &existed));
    capacity_->Poke();
    resp->set_existed(existed);
    return Status::Ok();
  });
}

grpc::Status NodeService::GetSnapshot(grpc::ServerContext* ctx, const v1::GetSnapshotRequest* req,
                                      v1::GetSnapshotResponse* resp) {
  return Run(ctx, "GetSnapshot", "", "", [&] {
    SnapshotRecord r;
    NODEVOL_RETURN_IF_ERROR(node_->GetSnapshot(req->name(), &r));
    ToProto(r, resp->mutable_snapshot());
    return Status::Ok();
  });
}

grpc::Status NodeService::ListSnapshots(grpc::ServerContext* ctx, const v1::ListSnapshotsRequest* req,
                                        v1::ListSnapshotsResponse* resp) {
  return Run(ctx, "ListSnapshots", req->source_volume(), "", [&] {
    std::vector<SnapshotRecord> snaps;
    NODEVOL_RETURN_IF_ERROR(node_->ListSnapshots(req->source_volume(), &snaps));
    for (const SnapshotRecord& r : snaps) ToProto(r, resp->add_snapshots());
    return Status::Ok();
  });
}

grpc::Status NodeService::Publish(grpc::ServerContext* ctx, const v1::PublishRequest* req, v1::PublishResponse* resp) {
  return Publish(*req, ctx->deadline(), resp);
}

grpc::Status NodeService::Publish(const v1::PublishRequest& request, std::chrono::system_clock::time_point deadline,
                                  v1::PublishResponse* resp) {
  const v1::PublishRequest* req = &request;
  std::string label = req->has_inline_() ? "(inline)" : req->volume();
  CallScope scope(deadline, "Publish");
  return calls_.RunJoined(nullptr, "Publish", label, req->target(), *req, resp, [&] {
    NODEVOL_RETURN_IF_ERROR(LocalOnly("Publish"));
    PublishArgs a;
    a.volume = req->volume();
    if (req->has_inline_()) {
      const v1::InlineVolume& in = req->inline_();
      a.inline_spec = InlineSpec{in.pool(), in.size_bytes(), in.fs_type(), ToParams(in.parameters())};
    }
    a.target = req->target();
    a.read_only = req->read_only();
    a.mount_options.assign(req->mount_options().begin(), req->mount_options().end());
    if (req->has_fs_group()) a.fs_group = req->fs_group();
    a.pod = {req->pod().uid(), req->pod().name(), req->pod().namespace_(), req->pod().service_account()};
    a.pool = req->pool();
    a.block = req->block();
    a.deadline = deadline;
    std::string volume, target;
    NODEVOL_RETURN_IF_ERROR(node_->Publish(a, &volume, &target));
    if (a.inline_spec) capacity_->Poke();
    resp->set_volume(volume);
    resp->set_target(target);
    return Status::Ok();
  });
}

grpc::Status NodeService::Unpublish(grpc::ServerContext* ctx, const v1::UnpublishRequest* req, v1::UnpublishResponse* resp) {
  return calls_.RunJoined(ctx, "Unpublish", "", req->target(), *req, resp, [&] {
    NODEVOL_RETURN_IF_ERROR(LocalOnly("Unpublish"));
    bool was = false;
    NODEVOL_RETURN_IF_ERROR(node_->Unpublish(req->target(), &was));
    capacity_->Poke();
    resp->set_was_published(was);
    return Status::Ok();
  });
}

grpc::Status NodeService::GetVolumeStats(grpc::ServerContext* ctx, const v1::GetVolumeStatsRequest* req,
                                         v1::GetVolumeStatsResponse* resp) {
  return Run(ctx, "GetVolumeStats", "", req->target(), [&] {
    NODEVOL_RETURN_IF_ERROR(LocalOnly("GetVolumeStats"));
    VolumeStats s;
    NODEVOL_RETURN_IF_ERROR(node_->GetVolumeStats(req->target(), &s));
    resp->set_volume(s.volume);
    resp->set_total_bytes(s.total_bytes);
    resp->set_used_bytes(s.used_bytes);
    resp->set_available_bytes(s.available_bytes);
    resp->set_total_inodes(s.total_inodes);
    resp->set_used_inodes(s.used_inodes);
    resp->set_free_inodes(s.free_inodes);
    return Status::Ok();
  });
}

}  // namespace nodevol
