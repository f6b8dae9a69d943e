// NodeService: csi.v1.Node on nodevold's CSI socket, the calls kubelet
// makes for spec.csi volumes and CSI inline volumes. A thin translator
// over the same Node domain the FlexVolume driver reaches through the
// Node API: publications, records, reconcile and idempotency are the
// domain's. It advertises no STAGE_UNSTAGE: nodevold stages a volume
// itself (an LVM mount, an NFS export) when its first publication needs
// it, and records it, so a second, kubelet-driven staging mount would
// only add one more mount to leak. VOLUME_MOUNT_GROUP: kubelet hands
// fsGroup over, and the domain applies it as for FlexVolume (on
// descriptors, never following a pod's symlinks).
#pragma once

#include <string>

#include "csi/v1/csi.grpc.pb.h"
#include "node/capacity_monitor.h"
#include "node/node.h"
#include "server/call_runner.h"

namespace nodevol::csi {

class NodeService final : public ::csi::v1::Node::Service {
 public:
  NodeService(nodevol::Node* node, CapacityMonitor* capacity, CallRunner* calls, std::string node_name);

  grpc::Status NodePublishVolume(grpc::ServerContext*, const ::csi::v1::NodePublishVolumeRequest*,
                                 ::csi::v1::NodePublishVolumeResponse*) override;
  grpc::Status NodeUnpublishVolume(grpc::ServerContext*, const ::csi::v1::NodeUnpublishVolumeRequest*,
                                   ::csi::v1::NodeUnpublishVolumeResponse*) override;
  grpc::Status NodeGetVolumeStats(grpc::ServerContext*, const ::csi::v1::NodeGetVolumeStatsRequest*,
                                  ::csi::v1::NodeGetVolumeStatsResponse*) override;
  grpc::Status NodeExpandVolume(grpc::ServerContext*, const ::csi::v1::NodeExpandVolumeRequest*,
                                ::csi::v1::NodeExpandVolumeResponse*) override;
  grpc::Status NodeGetCapabilities(grpc::ServerContext*, const ::csi::v1::NodeGetCapabilitiesRequest*,
                                   ::csi::v1::NodeGetCapabilitiesResponse*) override;
  grpc::Status NodeGetInfo(grpc::ServerContext*, const ::csi::v1::NodeGetInfoRequest*,
                           ::csi::v1::NodeGetInfoResponse*) override;

 private:
  nodevol::Node* node_;
  CapacityMonitor* capacity_;
  CallRunner* calls_;
  std::string node_name_;
};

}  // namespace nodevol::csi
