// A CA bundle as nodevol publishes it (ConfigMap nodevol-ca, key ca.crt;
// docs/enrollment.md "Rotating the CA"): PEM certificates, the first the
// CA that signs now, any others CAs being retired, still trusted while
// the nodes move off them. Nodes and the provisioner trust every one; a
// node asks for a new certificate when its own does not chain to the
// first. Certificates are named by the SHA-256 of their DER, in hex: what
// a node announces on its Node (nodevol.io/serving-ca).
#pragma once

#include <string>
#include <vector>

#include "pki/cert.h"

namespace nodevol::pki {

struct BundleCert {
  std::string pem;          // this certificate alone
  std::string fingerprint;  // 64 hex digits
  Validity validity;
};

// The certificates of `bundle_pem`, in order; text that is not a
// certificate is skipped, and so is a certificate seen before.
std::vector<BundleCert> SplitBundle(const std::string& bundle_pem);

// The fingerprint of the first certificate of `pem`; "" when it holds none.
std::string Fingerprint(const std::string& pem);

// The first 16 hex digits of a fingerprint: how logs name a CA.
inline std::string ShortFingerprint(const std::string& fingerprint) { return fingerprint.substr(0, 16); }

// The PEM of these certificates, one after another.
std::string JoinBundle(const std::vector<BundleCert>& certs);

// Which certificate of `bundle` the first certificate of `cert_pem`
// chains to at `at` (VerifyChain with each alone, first first); null when
// none.
const BundleCert* IssuerIn(const std::vector<BundleCert>& bundle, const std::string& cert_pem,
                           std::chrono::system_clock::time_point at);

}  // namespace nodevol::pki
