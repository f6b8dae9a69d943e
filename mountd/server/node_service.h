// NodeService: the gRPC face of Node (nodevol.v1.Node). A thin translator:
// it converts messages to domain calls and Status to grpc::Status, logs one
// line per call (method, volume, target, duration, outcome) and feeds the
// metrics. No domain decision is made here.
//
// One instance per listener: the local unix socket serves every method; the
// TCP (mutual TLS) listener only the provisioner's, and answers Publish,
// Unpublish and GetVolumeStats with PERMISSION_DENIED, because what gets
// mounted under kubelet's pods directory is decided on the node itself.
// The flex door (server/flex_door.h) has one of its own (kFlex: every
// method, logged via=flex) and calls it without a ServerContext: Publish
// through the overload that takes the driver's deadline, Unpublish,
// GetVolume and ExpandVolume with a null context, which they never read.
#pragma once

#include <atomic>
#include <chrono>

#include "metrics/metrics.h"
#include "server/call_runner.h"
#include "node/capacity_monitor.h"
#include "node/node.h"
#include "nodevol/v1/node.grpc.pb.h"

namespace nodevol {

// Metadata key of nodevold's own GetInfo probe (daemon/socket_probe.h);
// honoured on the unix socket only.
inline constexpr char kProbeMetadata[] = "nodevol-probe";

class NodeService final : public v1::Node::Service {
 public:
  enum class Listener { kLocal, kRemote, kFlex };

  NodeService(Node* node, CapacityMonitor* capacity, metrics::Registry* metrics, std::string node_name,
              unsigned default_heartbeat_seconds, Listener listener = Listener::kLocal);

  grpc::Status GetInfo(grpc::ServerContext*, const v1::GetInfoRequest*, v1::GetInfoResponse*) override;
  grpc::Status GetCapacity(grpc::ServerContext*, const v1::GetCapacityRequest*, v1::GetCapacityResponse*) override;
  grpc::Status WatchCapacity(grpc::ServerContext*, const v1::WatchCapacityRequest*,
                             grpc::ServerWriter<v1::GetCapacityResponse>*) override;
  grpc::Status CreateVolume(grpc::ServerContext*, const v1::CreateVolumeRequest*, v1::CreateVolumeResponse*) override;
  grpc::Status DeleteVolume(grpc::ServerContext*, const v1::DeleteVolumeRequest*, v1::DeleteVolumeResponse*) override;
  grpc::Status ExpandVolume(grpc::ServerContext*, const v1::ExpandVolumeRequest*, v1::ExpandVolumeResponse*) override;
  grpc::Status GetVolume(grpc::ServerContext*, const v1::GetVolumeRequest*, v1::GetVolumeResponse*) override;
  grpc::Status ListVolumes(grpc::ServerContext*, const v1::ListVolumesRequest*, v1::ListVolumesResponse*) override;
  grpc::Status CreateSnapshot(grpc::ServerContext*, const v1::CreateSnapshotRequest*,
                              v1::CreateSnapshotResponse*) override;
  grpc::Status DeleteSnapshot(grpc::ServerContext*, const v1::DeleteSnapshotRequest*,
                              v1::DeleteSnapshotResponse*) override;
  grpc::Status GetSnapshot(grpc::ServerContext*, const v1::GetSnapshotRequest*, v1::GetSnapshotResponse*) override;
  grpc::Status ListSnapshots(grpc::ServerContext*, const v1::ListSnapshotsRequest*,
                             v1::ListSnapshotsResponse*) override;
  grpc::Status Publish(grpc::ServerContext*, const v1::PublishRequest*, v1::PublishResponse*) override;
  grpc::Status Publish(const v1::PublishRequest& req, std::chrono::system_clock::time_point deadline,
                       v1::PublishResponse* resp);
  grpc::Status Unpublish(grpc::ServerContext*, const v1::UnpublishRequest*, v1::UnpublishResponse*) override;
  grpc::Status GetVolumeStats(grpc::ServerContext*, const v1::GetVolumeStatsRequest*,
                              v1::GetVolumeStatsResponse*) override;

  // The CSI driver GetInfo reports (set when the CSI front door is on).
  void SetCsiDriver(std::string driver) { csi_driver_ = std::move(driver); }
  // Makes open WatchCapacity streams end (before server shutdown).
  void Shutdown() { shutting_down_ = true; }
  // Waits until no unary call is running, or until the deadline; false on
  // timeout. Lets a stop finish in-flight operations without waiting for
  // idle client connections to go away.
  bool WaitIdle(std::chrono::steady_clock::time_point deadline);

 private:
  // probe: a call of nodevold's own health probe, logged at trace only.
  template <typename Fn>
  grpc::Status Run(const grpc::ServerContextBase* ctx, const char* method, const std::string& volume,
                   const std::string& target, Fn fn, bool probe = false);
  // PERMISSION_DENIED for a local-only method on the remote listener.
  Status LocalOnly(const char* method) const;

  Node* node_;
  CapacityMonitor* capacity_;
  std::string node_name_;
  unsigned heartbeat_seconds_;
  Listener listener_;
  std::string csi_driver_;
  std::atomic<bool> shutting_down_{false};
  CallRunner calls_;
};

}  // namespace nodevol
