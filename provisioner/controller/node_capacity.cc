#include "controller/node_capacity.h"

#include "controller/names.h"

namespace nodevol::provisioner {

kube::Result MirrorCapacity(kube::Api* client, const nlohmann::json& node, const nodes::NodeState& state) {
  const std::string prefix = kAnnCapacityPrefix;
  auto current = node["metadata"].value("annotations", nlohmann::json::object());
  nlohmann::json want = nlohmann::json::object();
  if (state.reachable)
    for (const auto& p : state.pools) want[prefix + p.name] = std::to_string(p.free_bytes);
  nlohmann::json patch = nlohmann::json::object();
  for (auto it = current.begin(); it != current.end(); ++it)
    if (it.key().rfind(prefix, 0) == 0 && !want.contains(it.key())) patch[it.key()] = nullptr;
  for (auto it = want.begin(); it != want.end(); ++it)
    if (!current.contains(it.key()) || current[it.key()] != it.value()) patch[it.key()] = it.value();
  if (patch.empty()) return kube::Result::Ok();
  return client->MergePatch("/api/v1/nodes/" + state.name, {{"metadata", {{"annotations", patch}}}});
}

}  // namespace nodevol::provisioner
