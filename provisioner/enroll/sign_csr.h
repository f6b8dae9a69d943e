// SignCsr: nodevol-provisioner's turn, as the signer nodevol.io/node-serving,
// on one CertificateSigningRequest. Idempotent, so a watch event, a resync
// and a retry after a conflict may all call it:
//  - a request of another signer, or one already Denied or Failed, or
//    already carrying a certificate: nothing to do;
//  - no verdict yet: CheckNodeCsr decides. Denied gets condition Denied
//    with the check's reason and message and a Warning event on the CSR;
//    approved gets condition Approved (both through /approval);
//  - Approved and no certificate: signed, if CheckNodeCsr approves it now
//    (an approval by someone else is not this signer's policy; a request it
//    will not sign gets condition Failed, through /status).
// A node past `rate_limit` (csr_rate_limit.h) is denied, or its request
// someone else approved Failed, before anything else is checked (reason
// TooManyRequests).
// The certificate lives the request's expirationSeconds (at least the
// API's own minimum, 10 minutes), at most max_lifetime.
// A 409 (the CSR changed meanwhile) is returned for the caller to retry.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "enroll/csr_check.h"

namespace nodevol::kube {
class Api;
}
namespace nodevol::pki {
class Ca;
}

namespace nodevol::provisioner {

class CsrRateLimit;
class EventRecorder;

struct SignerConfig {
  // The CA to sign with now (NodeCa::Signer: it follows the CA Secret).
  std::function<std::shared_ptr<const pki::Ca>()> ca;
  std::chrono::seconds max_lifetime{std::chrono::hours(24 * 30)};
  NodeLookup node_lookup;
  EventRecorder* events = nullptr;  // may be null
  CsrRateLimit* rate_limit = nullptr;  // may be null: no limit
};

// What SignCsr did, for logs and tests.
enum class SignOutcome { kIgnored, kApproved, kDenied, kSigned, kFailed };

Status SignCsr(kube::Api* api, const SignerConfig& config, const nlohmann::json& csr, SignOutcome* outcome);

}  // namespace nodevol::provisioner
