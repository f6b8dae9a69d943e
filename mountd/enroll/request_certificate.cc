#include "enroll/request_certificate.h"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/backoff.h"
#include "kube/api.h"
#include "kube/base64.h"
#include "kube/fields.h"
#include "pki/cert.h"

namespace nodevol::enroll {
namespace {

constexpr char kCsrs[] = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
// Names are at most 253 characters; generateName adds 5.
constexpr size_t kMaxNodeInName = 200;

nlohmann::json CsrObject(const CertificateAsk& ask, const std::string& request_pem) {
  nlohmann::json spec = {{"request", kube::EncodeBase64(request_pem)},
                         {"signerName", kSignerName},
                         {"usages", {"digital signature", "server auth"}}};
  if (ask.lifetime.count() > 0) spec["expirationSeconds"] = ask.lifetime.count();
  return {{"apiVersion", "certificates.k8s.io/v1"},
          {"kind", "CertificateSigningRequest"},
          {"metadata", {{"generateName", "nodevol-" + ask.node.substr(0, kMaxNodeInName) + "-"}}},
          {"spec", spec}};
}

// The Denied or Failed condition of a CSR, if it has one.
bool Refused(const nlohmann::json& csr, std::string* why) {
  const auto& status = kube::Obj(csr, "status");
  auto conditions = status.find("conditions");
  if (conditions == status.end() || !conditions->is_array()) return false;
  for (const auto& c : *conditions) {
    std::string type = kube::Str(c, "type");
    if (type == "Denied" || type == "Failed") {
      *why = type + ": " + kube::Str(c, "reason") + ": " + kube::Str(c, "message");
      return true;
    }
  }
  return false;
}

Status FromResult(const kube::Result& r, const std::string& what) {
  if (r.ok()) return Status::Ok();
  std::string msg = what + ": " + r.ToString();
  if (r.code() == kube::Result::Code::kForbidden || r.code() == kube::Result::Code::kUnauthorized)
    return Status::FailedPrecondition(msg + " (is the kubeconfig the node's own, user system:node:<node>?)");
  if (r.code() == kube::Result::Code::kInvalid || r.code() == kube::Result::Code::kBadRequest)
    return Status::InvalidArgument(msg);
  return Status::Unavailable(msg);
}

}  // namespace

Status RequestCertificate(kube::Api* api, const CertificateAsk& ask, const Sleep& sleep, std::string* key_pem,
                          std::string* cert_pem) {
  for (;;) {
    std::string key, request;
    NODEVOL_RETURN_IF_ERROR(pki::MakeKeyAndRequest(ask.node, {ask.node}, ask.ips, &key, &request));
    nlohmann::json made;
    NODEVOL_RETURN_IF_ERROR(FromResult(api->Create(kCsrs, CsrObject(ask, request), &made),
                                       "create a certificate signing request"));
    const std::string name = kube::Str(kube::Obj(made, "metadata"), "name");
    if (name.empty()) return Status::Internal("the apiserver named no certificate signing request");
    spdlog::info("enrollment: asked signer {} for a serving certificate for node {} ({}), request {}", kSignerName,
                 ask.node, ask.ips.empty() ? "no addresses" : fmt::format("{}", fmt::join(ask.ips, ", ")), name);

    // The signer usually answers within a few hundred milliseconds.
    Backoff backoff(std::chrono::milliseconds(250), std::chrono::milliseconds(30000), 0.2);
    int reads = 0;
    for (;;) {
      if (!sleep(backoff.Next())) return Status::Cancelled("stopping");
      nlohmann::json csr;
      kube::Result r = api->Get(std::string(kCsrs) + "/" + name, &csr);
      if (r.code() == kube::Result::Code::kNotFound) {
        spdlog::warn("enrollment: request {} was deleted before it was answered; asking again", name);
        break;
      }
      if (!r.ok()) {
        spdlog::warn("enrollment: cannot read request {}: {}", name, r.ToString());
        continue;
      }
      if (std::string why; Refused(csr, &why))
        return Status::PermissionDenied("signer " + std::string(kSignerName) + " refused request " + name + ": " + why);
      std::string encoded = kube::Str(kube::Obj(csr, "status"), "certificate");
      if (encoded.empty()) {
        if (++reads == 12)
          spdlog::warn("enrollment: request {} not answered yet; is nodevol-provisioner running with a node CA "
                       "(--node-ca-secret)? Still waiting", name);
        continue;
      }
      std::string cert;
      if (!kube::DecodeBase64(encoded, &cert))
        return Status::FailedPrecondition("request " + name + ": the certificate is not base64");
      pki::CertFacts facts;
      if (Status st = pki::ReadCertificate(cert, key, &facts); !st.ok())
        return Status::FailedPrecondition("request " + name + ": the issued certificate is unusable: " + st.message());
      if (std::find(facts.dns_names.begin(), facts.dns_names.end(), ask.node) == facts.dns_names.end())
        return Status::FailedPrecondition("request " + name + ": the issued certificate does not name node " + ask.node);
      *key_pem = std::move(key);
      *cert_pem = std::move(cert);
      return Status::Ok();
    }
  }
}

}  // namespace nodevol::enroll
