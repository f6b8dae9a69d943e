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
  n.internal_ips = kube::NodeInternalIps(node);
  if (!n.internal_ips.empty()) n.internal_ip = n.internal_ips.front();
  return n;
}

}  // namespace nodevol::provisioner
