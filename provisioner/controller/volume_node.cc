#include "controller/volume_node.h"

namespace nodevol::provisioner {

std::shared_ptr<nodes::NodeClient> VolumeNode(ControllerContext& ctx, const std::string& volume,
                                              const std::string& node, const std::string& pool,
                                              const std::string& backend, std::string* why) {
  bool node_reachable = false;
  for (const auto& p : ctx.node_view->Pools())
    if (p.node == node && p.reachable) node_reachable = true;
  if (backend != "nfs" || node_reachable) {
    auto client = ctx.node_view->Client(node);
    if (!client) *why = "node " + node + " (pool " + pool + ") is not reachable";
    return client;
  }
  for (const auto& p : ctx.node_view->Pools()) {
    if (p.pool != pool || p.backend != "nfs" || !p.reachable || p.node == node) continue;
    auto client = ctx.node_view->Client(p.node);
    if (!client) continue;
    v1::GetVolumeRequest req;
    req.set_name(volume);
    req.set_shared_pool(pool);  // it knows the volume if the export has its record
    v1::GetVolumeResponse resp;
    if (client->GetVolume(req, &resp).ok()) return client;
  }
  *why = "node " + node + " (NFS pool " + pool + ") is not reachable and no other node serving the pool knows " +
         volume;
  return nullptr;
}

}  // namespace nodevol::provisioner
