#include "csi/identity_service.h"

#include <spdlog/spdlog.h>

#include "base/version.h"
#include "csi/driver.h"

namespace nodevol::csi {

grpc::Status IdentityService::GetPluginInfo(grpc::ServerContext*, const ::csi::v1::GetPluginInfoRequest*,
                                            ::csi::v1::GetPluginInfoResponse* out) {
  out->set_name(kDriverName);
  out->set_vendor_version(Version());
  return grpc::Status::OK;
}

grpc::Status IdentityService::GetPluginCapabilities(grpc::ServerContext*,
                                                    const ::csi::v1::GetPluginCapabilitiesRequest*,
                                                    ::csi::v1::GetPluginCapabilitiesResponse* out) {
  // Every volume lives on (or, for NFS, is reached from) the nodes that
  // serve its pool: a CO must honour the topology NodeGetInfo reports.
  out->add_capabilities()->mutable_service()->set_type(
      ::csi::v1::PluginCapability::Service::VOLUME_ACCESSIBILITY_CONSTRAINTS);
  // For this node's pools only (csi/controller_service.h), on a socket of
  // its own, when --csi-controller=on: for csi-sanity and sidecars run
  // per node.
  if (controller_)
    out->add_capabilities()->mutable_service()->set_type(::csi::v1::PluginCapability::Service::CONTROLLER_SERVICE);
  // Volumes grow while mounted.
  out->add_capabilities()->mutable_volume_expansion()->set_type(::csi::v1::PluginCapability::VolumeExpansion::ONLINE);
  return grpc::Status::OK;
}

grpc::Status IdentityService::Probe(grpc::ServerContext*, const ::csi::v1::ProbeRequest*,
                                    ::csi::v1::ProbeResponse* out) {
  std::string why;
  bool ready = ready_(&why);
  out->mutable_ready()->set_value(ready);
  if (!ready) spdlog::debug("csi Probe: not ready: {}", why);
  return grpc::Status::OK;
}

}  // namespace nodevol::csi
