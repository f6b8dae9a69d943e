#include "nodes/kube_node.h"

#include <algorithm>

#include "base/host_port.h"
#include "controller/names.h"
#include "enroll/ca_rotation.h"
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
  n.endpoint = kube::Str(kube::Obj(meta, "annotations"), kAnnEndpoint);
  n.serving_ca = kube::Str(kube::Obj(meta, "annotations"), kServingCaAnnotation);
  if (!n.internal_ips.empty()) n.internal_ip = n.internal_ips.front();
  return n;
}

std::string DialAddress(const KubeNode& node, int default_port, std::string* ignored) {
  ignored->clear();
  if (node.internal_ip.empty()) return "";
  std::string fallback = JoinHostPort(node.internal_ip, default_port);
  if (node.endpoint.empty()) return fallback;
  auto refuse = [&](const std::string& why) {
    *ignored = std::string("annotation ") + kAnnEndpoint + "=\"" + node.endpoint + "\" " + why + "; dialling " +
               fallback;
    return fallback;
  };
  size_t colon = node.endpoint.rfind(':');
  if (colon == std::string::npos || colon == 0) return refuse("is not host:port");
  std::string host = node.endpoint.substr(0, colon), port_text = node.endpoint.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = 0;
  for (char ch : port_text) {
    if (ch < '0' || ch > '9' || port > 65535) return refuse("has no valid port");
    port = port * 10 + (ch - '0');
  }
  if (port_text.empty() || port < 1 || port > 65535) return refuse("has no valid port");
  if (std::find(node.internal_ips.begin(), node.internal_ips.end(), host) == node.internal_ips.end())
    return refuse("names an address that is not one of the Node's InternalIP addresses");
  return JoinHostPort(host, port);
}

}  // namespace nodevol::provisioner
