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
  // nodevol.io/endpoint: where an enrolled nodevold says it listens
  // (mountd/enroll/enroller.h); "" when it did not say.
  std::string endpoint;
  // nodevol.io/serving-ca: the fingerprint of the CA its certificate comes
  // from, as it says (enroll/ca_rotation.h); "" when it did not say.
  std::string serving_ca;

  // Whether it carries `label` ("key=value"); "" is carried by every node.
  bool HasLabel(const std::string& label) const {
    if (label.empty()) return true;
    auto eq = label.find('=');
    auto it = labels.find(label.substr(0, eq));
    return it != labels.end() && it->second == (eq == std::string::npos ? "" : label.substr(eq + 1));
  }

  // kubernetes.io/hostname: the topology of capacity objects.
  std::string Hostname() const {
    auto it = labels.find("kubernetes.io/hostname");
    return it == labels.end() ? "" : it->second;
  }
};

KubeNode DecodeNode(const nlohmann::json& node);

// Where to dial the node's nodevold: its nodevol.io/endpoint when that
// names one of its InternalIP addresses and a port, else its first
// InternalIP and default_port; "" when it has no InternalIP. A node may
// write its own annotation, so one that points anywhere else is ignored,
// and *ignored says why (the TLS name check would refuse another host's
// certificate anyway; this keeps the provisioner from dialling it).
std::string DialAddress(const KubeNode& node, int default_port, std::string* ignored);

}  // namespace nodevol::provisioner
