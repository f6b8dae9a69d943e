// ControllerService: csi.v1.Controller for this node's own pools, on the
// CSI socket. nodevol-provisioner does not use it (it reaches every node
// through the Node API); it is here so that the tools written for CSI
// drivers work against one node: csi-sanity, and upstream sidecars
// (external-provisioner, external-resizer) deployed per node. Volumes it
// makes are ordinary domain volumes, visible to nodevolctl.
//
// CreateVolume takes the pool from parameters["pool"]; the volume's id is
// its name (the CO's, e.g. "pvc-<uid>"); the answer's topology is this
// node. No CONTROLLER_PUBLISH: nothing attaches, so the CSIDriver says
// attachRequired: false. ListVolumes lists this node's volumes only.
#pragma once

#include <string>

#include "csi/v1/csi.grpc.pb.h"
#include "node/capacity_monitor.h"
#include "node/node.h"
#include "server/call_runner.h"

namespace nodevol::csi {

class ControllerService final : public ::csi::v1::Controller::Service {
 public:
  ControllerService(nodevol::Node* node, CapacityMonitor* capacity, CallRunner* calls, std::string node_name);

  grpc::Status CreateVolume(grpc::ServerContext*, const ::csi::v1::CreateVolumeRequest*,
                            ::csi::v1::CreateVolumeResponse*) override;
  grpc::Status DeleteVolume(grpc::ServerContext*, const ::csi::v1::DeleteVolumeRequest*,
                            ::csi::v1::DeleteVolumeResponse*) override;
  grpc::Status ControllerExpandVolume(grpc::ServerContext*, const ::csi::v1::ControllerExpandVolumeRequest*,
                                      ::csi::v1::ControllerExpandVolumeResponse*) override;
  grpc::Status ValidateVolumeCapabilities(grpc::ServerContext*, const ::csi::v1::ValidateVolumeCapabilitiesRequest*,
                                          ::csi::v1::ValidateVolumeCapabilitiesResponse*) override;
  grpc::Status GetCapacity(grpc::ServerContext*, const ::csi::v1::GetCapacityRequest*,
                           ::csi::v1::GetCapacityResponse*) override;
  // Ready persistent volumes by name; next_token is "n:<last name given>",
  // so a page stays right when volumes come and go between calls.
  grpc::Status ListVolumes(grpc::ServerContext*, const ::csi::v1::ListVolumesRequest*,
                           ::csi::v1::ListVolumesResponse*) override;
  // Snapshots (csi/controller_snapshots.cc), offered when a pool of this
  // node takes them (lvm thin); snapshot_id is the snapshot's name.
  grpc::Status CreateSnapshot(grpc::ServerContext*, const ::csi::v1::CreateSnapshotRequest*,
                              ::csi::v1::CreateSnapshotResponse*) override;
  grpc::Status DeleteSnapshot(grpc::ServerContext*, const ::csi::v1::DeleteSnapshotRequest*,
                              ::csi::v1::DeleteSnapshotResponse*) override;
  // Ready snapshots by name; next_token "s:<last name given>".
  grpc::Status ListSnapshots(grpc::ServerContext*, const ::csi::v1::ListSnapshotsRequest*,
                             ::csi::v1::ListSnapshotsResponse*) override;
  grpc::Status ControllerGetCapabilities(grpc::ServerContext*, const ::csi::v1::ControllerGetCapabilitiesRequest*,
                                         ::csi::v1::ControllerGetCapabilitiesResponse*) override;

 private:
  // The pool named by parameters, with its backend kind; INVALID_ARGUMENT
  // listing the pools when it is missing or unknown.
  Status PoolOf(const google::protobuf::Map<std::string, std::string>& parameters, PoolView* out) const;
  // Whether any pool of this node takes snapshots.
  bool AnyPoolSnapshots() const;
  // Whether a topology requirement admits this node.
  bool Admits(const ::csi::v1::TopologyRequirement& req) const;

  nodevol::Node* node_;
  CapacityMonitor* capacity_;
  CallRunner* calls_;
  std::string node_name_;
};

}  // namespace nodevol::csi
