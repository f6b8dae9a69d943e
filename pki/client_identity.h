// ClientIdentity: whether a client certificate that chained to a CA is one
// of the identities a listener lets in. A CA signs for many (nodes,
// kube-scheduler, the provisioner, an operator), so "chains to the CA"
// says only who signed; each mutual-TLS listener also names whom it
// accepts (issue 57, item 5: any certificate of nodevold's CA reached
// CreateVolume and DeleteVolume on every node).
//
// A certificate passes when
//   - its extendedKeyUsage names clientAuth: one with no extendedKeyUsage
//     is good for any purpose to OpenSSL, and a node's serving certificate
//     (serverAuth only) must never pass for a client;
//   - its subject CN or one of its DNS subjectAltNames is exactly one of
//     `accepted`. IP subjectAltNames never count: who holds an address is
//     not who a certificate names.
// `accepted` empty accepts any name (what a listener without pinning did).
#pragma once

#include <string>
#include <vector>

#include <openssl/x509.h>

#include "base/status.h"

namespace nodevol::pki {

// OK and the name that matched in *who; PERMISSION_DENIED saying what the
// certificate names and what would be accepted.
Status CheckClientIdentity(X509* cert, const std::vector<std::string>& accepted, std::string* who);
// The same for the first certificate of a PEM text (gRPC's AuthContext
// gives the peer's certificate so); INVALID_ARGUMENT when it holds none.
Status CheckClientIdentityPem(const std::string& pem, const std::vector<std::string>& accepted, std::string* who);

}  // namespace nodevol::pki
