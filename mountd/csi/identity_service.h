// IdentityService: csi.v1.Identity on nodevold's CSI socket. kubelet
// never calls it; csi-sanity, liveness probes and tools do, and the CSI
// spec requires it of every plugin. A thin translator like NodeService.
#pragma once

#include <functional>

#include "csi/v1/csi.grpc.pb.h"

namespace nodevol::csi {

class IdentityService final : public ::csi::v1::Identity::Service {
 public:
  // ready: whether nodevold serves volumes now (Probe's answer); its
  // reason for not serving, if any, goes to *why. controller: whether
  // nodevold serves csi.v1.Controller (on controller.sock only; the node
  // socket kubelet dials never does, but says so too, as the plugin's).
  IdentityService(std::function<bool(std::string* why)> ready, bool controller)
      : ready_(std::move(ready)), controller_(controller) {}

  grpc::Status GetPluginInfo(grpc::ServerContext*, const ::csi::v1::GetPluginInfoRequest*,
                             ::csi::v1::GetPluginInfoResponse*) override;
  grpc::Status GetPluginCapabilities(grpc::ServerContext*, const ::csi::v1::GetPluginCapabilitiesRequest*,
                                     ::csi::v1::GetPluginCapabilitiesResponse*) override;
  grpc::Status Probe(grpc::ServerContext*, const ::csi::v1::ProbeRequest*, ::csi::v1::ProbeResponse*) override;

 private:
  std::function<bool(std::string*)> ready_;
  bool controller_;
};

}  // namespace nodevol::csi
