#include "nodes/kube_node.h"

#include "controller/names.h"
#include "kube/fields.h"

namespace nodevol::provisioner {

KubeNode DecodeNode(const nlohmann::json& node) {
  KubeNode n;
  const auto& meta = kube::Obj(node, "metadata");
  n.name = kube::Str(meta, "name");
  n.resource_version = kube::Str(meta, "resourceVersion");
  n.labels = kube::StringMap(kube::Obj(meta, "labels"));
  const std::string prefix = kAnnCapacityPrefix;
  for (const auto& [k, v] : kube::StringMap(kube::Obj(meta, "annotations")))
    if (k.rfind(prefix, 0) == 0) n.capacity_annotations[k] = v;
  const auto& status = kube::Obj(node, "status");
  auto addresses = status.find("addresses");
  if (addresses != status.end() && addresses->is_array())
    for (const auto& a : *addresses)
      if (kube::Str(a, "type") == "InternalIP") n.internal_ips.push_back(kube::Str(a, "address"));
  if (!n.internal_ips.empty()) n.internal_ip = n.internal_ips.front();
  return n;
}

}  // namespace nodevol::provisioner
