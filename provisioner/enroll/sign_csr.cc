#include "enroll/sign_csr.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "controller/events.h"
#include "enroll/csr_rate_limit.h"
#include "kube/api.h"
#include "kube/base64.h"
#include "pki/ca.h"

namespace nodevol::provisioner {
namespace {

constexpr char kCsrPath[] = "/apis/certificates.k8s.io/v1/certificatesigningrequests/";
// The API's minimum expirationSeconds.
constexpr std::chrono::seconds kMinLifetime{600};

nlohmann::json Condition(const std::string& type, const std::string& reason, const std::string& message) {
  std::string now = NowRfc3339();
  return {{"type", type},       {"status", "True"},           {"reason", reason},
          {"message", message}, {"lastUpdateTime", now},      {"lastTransitionTime", now}};
}

nlohmann::json WithCondition(nlohmann::json csr, nlohmann::json condition) {
  auto& status = csr["status"];
  if (!status.is_object()) status = nlohmann::json::object();
  if (!status.contains("conditions") || !status["conditions"].is_array()) status["conditions"] = nlohmann::json::array();
  status["conditions"].push_back(std::move(condition));
  return csr;
}

Status FromResult(const kube::Result& r, const std::string& what) {
  if (r.ok()) return Status::Ok();
  if (r.http_status() == 409) return Status::Aborted(what + ": the request changed meanwhile (" + r.ToString() + ")");
  return Status::Unavailable(what + ": " + r.ToString());
}

}  // namespace

Status SignCsr(kube::Api* api, const SignerConfig& config, const nlohmann::json& csr, SignOutcome* outcome) {
  *outcome = SignOutcome::kIgnored;
  CsrRequest r = DecodeCsr(csr);
  if (r.signer != kNodeServingSigner || r.denied || r.failed || r.has_certificate || r.name.empty())
    return Status::Ok();
  const std::string path = kCsrPath + r.name;
  CsrVerdict v;
  // The limit first: it costs no read of the Node (issue 60: one node's
  // flood of requests held the signer's single worker).
  const std::string node_prefix = "system:node:";
  std::string asker = r.username.rfind(node_prefix, 0) == 0 ? r.username.substr(node_prefix.size()) : "";
  if (config.rate_limit && !asker.empty() && !config.rate_limit->Allows(asker, r.uid)) {
    v.reason = "TooManyRequests";
    v.message = "node " + asker + " made " + std::to_string(config.rate_limit->per_hour()) +
                " certificate requests in the last hour, where a healthy node asks once per renewal; it asks "
                "again after its recheck interval (nodevold's log says why it keeps asking)";
  } else {
    v = CheckNodeCsr(r, config.node_lookup);
    if (!v.undecided.ok()) return v.undecided.WithContext("check " + r.name);
    // Counted once decided, whatever the verdict: a flood of requests the
    // check denies is a flood too.
    if (config.rate_limit && !asker.empty()) config.rate_limit->Note(asker, r.uid);
  }

  if (!r.approved) {
    if (!v.approve) {
      auto result = api->Update(path + "/approval", WithCondition(csr, Condition("Denied", v.reason, v.message)));
      NODEVOL_RETURN_IF_ERROR(FromResult(result, "deny " + r.name));
      spdlog::warn("certificate request {} of {} denied: {}: {}", r.name, r.username, v.reason, v.message);
      // Items of a list carry no kind: the reference is written out.
      if (config.events)
        config.events->Record(ObjectRef{"CertificateSigningRequest", "certificates.k8s.io/v1", "", r.name, r.uid,
                                        r.resource_version},
                              "Warning", "CertificateDenied", v.reason + ": " + v.message);
      *outcome = SignOutcome::kDenied;
      return Status::Ok();
    }
    nlohmann::json approved;
    auto result = api->Update(path + "/approval",
                              WithCondition(csr, Condition("Approved", "NodevolNodeServing",
                                                           "node " + v.node + " asks for its own serving certificate")),
                              &approved);
    NODEVOL_RETURN_IF_ERROR(FromResult(result, "approve " + r.name));
    *outcome = SignOutcome::kApproved;
    // Signed below, from what the apiserver answered (its resourceVersion).
    return SignCsr(api, config, approved, outcome);
  }

  if (!v.approve) {
    auto result = api->Update(path + "/status", WithCondition(csr, Condition("Failed", v.reason, v.message)));
    NODEVOL_RETURN_IF_ERROR(FromResult(result, "fail " + r.name));
    spdlog::warn("certificate request {} of {} was approved, but this signer does not sign it: {}: {}", r.name,
                 r.username, v.reason, v.message);
    *outcome = SignOutcome::kFailed;
    return Status::Ok();
  }
  std::shared_ptr<const pki::Ca> ca = config.ca ? config.ca() : nullptr;
  if (!ca) return Status::FailedPrecondition("no CA to sign " + r.name + " with");
  // The request's expirationSeconds (the API's minimum is 600 s), cut to
  // this signer's maximum, which may be shorter (tests of rotation).
  auto lifetime = config.max_lifetime;
  if (r.expiration_seconds > 0)
    lifetime = std::min(std::max(std::chrono::seconds(r.expiration_seconds), kMinLifetime), config.max_lifetime);
  pki::Ca::Leaf leaf{v.node, v.dns_names, v.ips, /*server_auth=*/true, /*client_auth=*/false, lifetime};
  std::string cert;
  NODEVOL_RETURN_IF_ERROR(ca->SignRequest(r.request_pem, leaf, &cert));
  nlohmann::json signed_csr = csr;
  if (!signed_csr["status"].is_object()) signed_csr["status"] = nlohmann::json::object();
  signed_csr["status"]["certificate"] = kube::EncodeBase64(cert);
  auto result = api->Update(path + "/status", signed_csr);
  NODEVOL_RETURN_IF_ERROR(FromResult(result, "write the certificate of " + r.name));
  spdlog::info("certificate request {}: signed a serving certificate for node {} ({} s)", r.name, v.node,
               lifetime.count());
  *outcome = SignOutcome::kSigned;
  return Status::Ok();
}

}  // namespace nodevol::provisioner
