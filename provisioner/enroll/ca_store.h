// Where the signer's CA lives in the cluster. LoadOrMakeCa reads it from a
// Secret of type kubernetes.io/tls (tls.crt, tls.key), or makes one and
// stores it there when the Secret does not exist; the first replica to get
// there wins: a 409 on create means another made it, and that CA is the
// one loaded. An operator may provide the Secret instead (e.g. from
// cert-manager): it is used as it is. PublishCaBundle writes the CA's
// certificate to a ConfigMap (ca.crt) that nodes may read, to check the
// provisioner's client certificate. The key is never logged.
#pragma once

#include <chrono>
#include <string>

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

// Creates the ConfigMap, or updates its ca.crt when it differs.
Status PublishCaBundle(kube::Api* api, const std::string& ns, const std::string& configmap,
                       const std::string& bundle_pem);

}  // namespace nodevol::provisioner
