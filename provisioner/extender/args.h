// ExtenderArgs: the part of kube-scheduler's extender request nodevol reads
// (k8s.io/kube-scheduler/extender/v1 ExtenderArgs, whose JSON keys are the
// Go field names: "Pod", "Nodes", "NodeNames"; scheduling-contract.md §3).
// The pod's identity, the claims its volumes use, and the candidate nodes
// (NodeNames with nodeCacheCapable: true, else the names of Nodes.items).
//
// The body comes from the network: DecodeExtenderArgs reads it as a stream
// of events (nlohmann's SAX interface) and keeps only the fields above, so
// what a request costs in memory is what it names, not its size (the whole
// document as a tree peaked at 600 MB for a 16 MiB body); it bounds
// nesting, never throws, and answers INVALID_ARGUMENT naming what is
// wrong; the caller bounds the size (httpd's max_body).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace nodevol::provisioner {

struct ExtenderArgs {
  std::string pod_namespace, pod_name, pod_uid;
  // persistentVolumeClaim claimNames, and <pod>-<volume> for generic
  // ephemeral volumes, in the pod's order, without repeats.
  std::vector<std::string> claim_names;
  std::vector<std::string> node_names;
  bool node_names_given = false;  // "NodeNames" was sent (nodeCacheCapable)
};

inline constexpr int kMaxJsonDepth = 64;
inline constexpr size_t kMaxExtenderNodes = 100000;

Status DecodeExtenderArgs(std::string_view body, ExtenderArgs* out);

}  // namespace nodevol::provisioner
