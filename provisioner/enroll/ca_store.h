// Where the signer's CA lives in the cluster. LoadOrMakeCa reads it from a
// Secret of type kubernetes.io/tls (tls.crt, tls.key), or makes one and
// stores it there when the Secret does not exist; the first replica to get
// there wins: a 409 on create means another made it, and that CA is the
// one loaded. An operator may provide the Secret instead (e.g. from
// cert-manager): it is used as it is. What nodes trust is published by
// the leader (node_ca.h). The key is never logged.
#pragma once

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace nodevol::kube {
class Api;
}
namespace nodevol::pki {
class Ca;
}

namespace nodevol::provisioner {

Status LoadOrMakeCa(kube::Api* api, const std::string& ns, const std::string& secret, std::chrono::seconds lifetime,
                    pki::Ca* out);

// The CA of a kubernetes.io/tls Secret's object (`where` names it in
// errors): INVALID_ARGUMENT when it holds none.
Status ReadCaSecret(const nlohmann::json& secret, const std::string& where, pki::Ca* out);

}  // namespace nodevol::provisioner
