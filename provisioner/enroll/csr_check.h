// CheckNodeCsr: whether nodevol-provisioner, the signer nodevol.io/node-serving,
// may sign a CertificateSigningRequest. It signs exactly one kind: a node,
// authenticated by the apiserver as system:node:<n>, asking for a serving
// certificate for itself (subject CN <n>, DNS name <n>, only the Node's own
// InternalIP addresses), for server auth only, with a key of a strength
// worth signing. Anything else is denied with a reason the requester can
// act on; nothing in the request is trusted that the apiserver did not
// vouch for (the username and groups are set by the apiserver, the
// addresses come from the Node object, not from the request).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace nodevol::provisioner {

inline constexpr char kNodeServingSigner[] = "nodevol.io/node-serving";

// What the check reads of a CSR object.
struct CsrRequest {
  std::string name, uid, resource_version;
  std::string signer, username;
  std::vector<std::string> groups, usages;
  std::string request_pem;  // spec.request, base64-decoded ("" when it was not base64)
  int64_t expiration_seconds = 0;  // spec.expirationSeconds; 0 when unset
  bool approved = false, denied = false, failed = false;  // status.conditions
  bool has_certificate = false;  // status.certificate is set
};
CsrRequest DecodeCsr(const nlohmann::json& csr);

struct CsrVerdict {
  bool approve = false;
  std::string reason;   // a CamelCase condition reason when denied
  std::string message;  // what was wrong, for the condition and the event
  std::string node;     // <n>, when the requester is a node
  // Not OK when no verdict could be reached (the Node could not be read):
  // neither approve nor deny, try again later.
  Status undecided;
  // What the certificate will name, normalised (approved requests only).
  std::vector<std::string> dns_names, ips;
};

// What the signer reads of a Node, from the Node object, never from the
// request: its InternalIP addresses, and whether a cluster admin marked it
// a storage node (the --storage-node-label, under node-restriction.
// kubernetes.io/ by default, which the NodeRestriction admission plugin
// forbids kubelets to set: a node cannot make itself one).
struct NodeFacts {
  std::vector<std::string> internal_ips;
  bool storage_node = false;
  std::string storage_label;  // "key=value" it lacks, for the message; "" when none is required
};

// Node `name`'s facts: NOT_FOUND when there is no such Node; any other
// error when it could not be read (the request waits).
using NodeLookup = std::function<Status(const std::string& name, NodeFacts* out)>;

CsrVerdict CheckNodeCsr(const CsrRequest& r, const NodeLookup& node_lookup);

}  // namespace nodevol::provisioner
