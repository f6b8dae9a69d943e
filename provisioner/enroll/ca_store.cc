#include "enroll/ca_store.h"

#include <spdlog/spdlog.h>

#include "kube/api.h"
#include "kube/base64.h"
#include "kube/fields.h"
#include "pki/ca.h"

namespace nodevol::provisioner {

Status ReadCaSecret(const nlohmann::json& secret, const std::string& where, pki::Ca* out) {
  const auto& data = kube::Obj(secret, "data");
  std::string cert, key;
  if (!kube::DecodeBase64(kube::Str(data, "tls.crt"), &cert) || !kube::DecodeBase64(kube::Str(data, "tls.key"), &key) ||
      cert.empty() || key.empty())
    return Status::InvalidArgument("Secret " + where + " has no base64 tls.crt and tls.key");
  Status st = pki::Ca::Load(cert, key, out);
  if (!st.ok()) return Status::InvalidArgument("Secret " + where + ": " + st.message());
  return Status::Ok();
}

Status LoadOrMakeCa(kube::Api* api, const std::string& ns, const std::string& secret, std::chrono::seconds lifetime,
                    pki::Ca* out) {
  const std::string collection = "/api/v1/namespaces/" + ns + "/secrets";
  const std::string where = ns + "/" + secret;
  nlohmann::json obj;
  kube::Result r = api->Get(collection + "/" + secret, &obj);
  if (r.ok()) return ReadCaSecret(obj, where, out);
  if (r.http_status() != 404) return Status::Unavailable("read the CA Secret " + where + ": " + r.ToString());

  pki::Ca ca;
  NODEVOL_RETURN_IF_ERROR(pki::Ca::Make("nodevol node CA", lifetime, &ca));
  nlohmann::json made = {
      {"apiVersion", "v1"},
      {"kind", "Secret"},
      {"type", "kubernetes.io/tls"},
      {"metadata", {{"name", secret}, {"namespace", ns}, {"labels", {{"app.kubernetes.io/name", "nodevol"}}}}},
      {"data", {{"tls.crt", kube::EncodeBase64(ca.cert_pem())}, {"tls.key", kube::EncodeBase64(ca.key_pem())}}}};
  r = api->Create(collection, made);
  if (r.ok()) {
    spdlog::info("made a new CA for the nodes' certificates in Secret {}", where);
    *out = std::move(ca);
    return Status::Ok();
  }
  if (r.http_status() != 409) return Status::Unavailable("store the CA in Secret " + where + ": " + r.ToString());
  // Another replica made it first: its CA is the one.
  r = api->Get(collection + "/" + secret, &obj);
  if (!r.ok()) return Status::Unavailable("read the CA Secret " + where + ": " + r.ToString());
  return ReadCaSecret(obj, where, out);
}

}  // namespace nodevol::provisioner
