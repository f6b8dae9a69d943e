// KubeNode: the parts of a nodevol node's Node object the provisioner reads
// (its address, labels and our capacity annotations); the node cache keeps
// these, not the objects, whose status (images, conditions) is most of
// their size.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nodevol::provisioner {

struct KubeNode {
  std::string name, resource_version;
  std::string internal_ip;  // the first InternalIP address, "" when none
  std::vector<std::string> internal_ips;  // all of them, in the Node's order
  std::map<std::string, std::string> labels;
  // Only annotations under capacity.nodevol.io/ (controller/node_capacity.h).
  std::map<std::string, std::string> capacity_annotations;

  // kubernetes.io/hostname: the topology of capacity objects.
  std::string Hostname() const {
    auto it = labels.find("kubernetes.io/hostname");
    return it == labels.end() ? "" : it->second;
  }
};

KubeNode DecodeNode(const nlohmann::json& node);

}  // namespace nodevol::provisioner
