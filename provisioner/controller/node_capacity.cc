#include "controller/node_capacity.h"

#include "controller/names.h"

namespace nodevol::provisioner {

kube::Result MirrorCapacity(kube::Api* client, const KubeNode& node, const nodes::NodeState& state) {
  const std::string prefix = kAnnCapacityPrefix;
  const auto& current = node.capacity_annotations;
  std::map<std::string, std::string> want;
  if (state.reachable)
    for (const auto& p : state.pools) want[prefix + p.name] = std::to_string(p.free_bytes);
  nlohmann::json patch = nlohmann::json::object();
  for (const auto& [k, v] : current)
    if (want.count(k) == 0) patch[k] = nullptr;
  for (const auto& [k, v] : want)
    if (auto it = current.find(k); it == current.end() || it->second != v) patch[k] = v;
  if (patch.empty()) return kube::Result::Ok();
  return client->MergePatch("/api/v1/nodes/" + state.name, {{"metadata", {{"annotations", patch}}}});
}

}  // namespace nodevol::provisioner
