// NodeClient: the provisioner's typed calls to one nodevold, each with a
// deadline, over a channel made by TlsChannelFactory (or any channel, for
// tests). Every call returns a nodevol::Status with the gRPC code 1:1 and
// a message naming the node and the method ("node worker-1: CreateVolume:
// pool fast has 1.2 GiB free, 5 GiB asked"), and fills the proto response.
// Calls fail fast (UNAVAILABLE) while the node cannot be reached instead
// of waiting for it. Thread-safe; share one per node.
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/support/status.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "nodevol/v1/node.grpc.pb.h"

namespace nodevol::nodes {

// The gRPC status as a nodevol::Status, message prefixed with context.
Status FromGrpc(const grpc::Status& status, std::string_view context);

// Parameter `key` a volume was created with ("" when absent).
inline std::string VolumeParam(const v1::Volume& v, const char* key) {
  auto it = v.parameters().find(key);
  return it == v.parameters().end() ? "" : it->second;
}

class NodeClient {
 public:
  NodeClient(std::string node, std::shared_ptr<grpc::Channel> channel,
             std::chrono::milliseconds timeout = std::chrono::seconds(60));

  const std::string& node() const { return node_; }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  v1::Node::Stub* stub() const { return stub_.get(); }

  Status GetInfo(v1::GetInfoResponse* out) const;
  Status CreateVolume(const v1::CreateVolumeRequest& req, v1::CreateVolumeResponse* out) const;
  Status DeleteVolume(const v1::DeleteVolumeRequest& req, v1::DeleteVolumeResponse* out) const;
  Status ExpandVolume(const v1::ExpandVolumeRequest& req, v1::ExpandVolumeResponse* out) const;
  Status GetVolume(const v1::GetVolumeRequest& req, v1::GetVolumeResponse* out) const;
  Status ListVolumes(const v1::ListVolumesRequest& req, v1::ListVolumesResponse* out) const;
  // Every volume on the node, read in pages of 1000 (gRPC's 4 MiB limit);
  // each page within page_timeout (0: the client's call timeout).
  Status ListAllVolumes(v1::ListVolumesResponse* out, std::chrono::milliseconds page_timeout = {}) const;
  Status CreateSnapshot(const v1::CreateSnapshotRequest& req, v1::CreateSnapshotResponse* out) const;
  Status DeleteSnapshot(const v1::DeleteSnapshotRequest& req, v1::DeleteSnapshotResponse* out) const;
  Status GetSnapshot(const v1::GetSnapshotRequest& req, v1::GetSnapshotResponse* out) const;

 private:
  template <typename Req, typename Resp, typename Method>
  Status Call(const char* name, Method method, const Req& req, Resp* out,
              std::chrono::milliseconds timeout = {}) const;

  std::string node_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Node::Stub> stub_;
  std::chrono::milliseconds timeout_;
};

}  // namespace nodevol::nodes
