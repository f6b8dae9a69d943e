#include "enroll/node_ca.h"

#include <fmt/chrono.h>
#include <spdlog/spdlog.h>

#include "controller/events.h"
#include "enroll/ca_store.h"
#include "kube/api.h"
#include "kube/fields.h"
#include "metrics/metrics.h"
#include "pki/ca.h"

namespace nodevol::provisioner {
namespace {

pki::BundleCert AsBundleCert(const pki::Ca& ca) {
  auto certs = pki::SplitBundle(ca.cert_pem());
  return certs.empty() ? pki::BundleCert{} : certs.front();
}

}  // namespace

NodeCa::NodeCa(kube::Api* api, Config config) : api_(api), config_(std::move(config)) {}

NodeCa::~NodeCa() { Stop(); }

Status NodeCa::Load() {
  auto ca = std::make_shared<pki::Ca>();
  NODEVOL_RETURN_IF_ERROR(LoadOrMakeCa(api_, config_.ns, config_.secret, config_.made_lifetime, ca.get()));
  {
    std::lock_guard<std::mutex> l(mu_);
    secret_ca_ = signer_ = ca;
  }
  Poll(false, std::nullopt);
  return Status::Ok();
}

std::shared_ptr<const pki::Ca> NodeCa::Signer() const {
  std::lock_guard<std::mutex> l(mu_);
  return signer_;
}

std::shared_ptr<const pki::Ca> NodeCa::ClientIssuer() const {
  std::lock_guard<std::mutex> l(mu_);
  return client_issuer_ ? client_issuer_ : signer_;
}

std::string NodeCa::TrustBundle() const {
  std::lock_guard<std::mutex> l(mu_);
  return trust_.empty() && signer_ ? signer_->cert_pem() : trust_;
}

PublishedCa NodeCa::Published() const {
  std::lock_guard<std::mutex> l(mu_);
  return published_;
}

bool NodeCa::FollowSecret() {
  const std::string where = config_.ns + "/" + config_.secret;
  nlohmann::json obj;
  kube::Result r = api_->Get("/api/v1/namespaces/" + config_.ns + "/secrets/" + config_.secret, &obj);
  if (!r.ok()) {
    spdlog::warn("node CA: cannot read Secret {} ({}); signing with the CA held", where, r.ToString());
    return false;
  }
  auto ca = std::make_shared<pki::Ca>();
  if (Status st = ReadCaSecret(obj, where, ca.get()); !st.ok()) {
    spdlog::warn("node CA: {}; signing with the CA held", st.message());
    return false;
  }
  std::lock_guard<std::mutex> l(mu_);
  if (secret_ca_ && pki::Fingerprint(secret_ca_->cert_pem()) == pki::Fingerprint(ca->cert_pem())) return true;
  spdlog::info("node CA: Secret {} holds another CA, {} (was {}): it signs once it is published first", where,
               pki::ShortFingerprint(pki::Fingerprint(ca->cert_pem())),
               secret_ca_ ? pki::ShortFingerprint(pki::Fingerprint(secret_ca_->cert_pem())) : "none");
  previous_ = secret_ca_;
  secret_ca_ = ca;
  return true;
}

void NodeCa::Publish(const std::optional<std::vector<std::string>>& node_cas,
                     std::chrono::system_clock::time_point now) {
  std::shared_ptr<const pki::Ca> signer;
  PublishedCa published;
  {
    std::lock_guard<std::mutex> l(mu_);
    signer = secret_ca_;
    published = published_;
  }
  // Unknown nodes: nothing is retired for having moved (ca_rotation.h's
  // other bounds still apply). A node that says nothing counts as not moved.
  std::vector<std::string> cas = node_cas ? *node_cas : std::vector<std::string>{""};
  std::string why;
  PublishedCa next = NextPublished(published, AsBundleCert(*signer), cas, now, config_.times, &why);
  if (why.empty()) return;
  const std::string collection = "/api/v1/namespaces/" + config_.ns + "/configmaps";
  const std::string where = config_.ns + "/" + config_.configmap;
  nlohmann::json patch = PublishedCaPatch(next);
  kube::Result r = api_->MergePatch(collection + "/" + config_.configmap, patch);
  if (r.code() == kube::Result::Code::kNotFound) {
    nlohmann::json made = patch;
    made["apiVersion"] = "v1";
    made["kind"] = "ConfigMap";
    made["metadata"]["name"] = config_.configmap;
    made["metadata"]["namespace"] = config_.ns;
    made["metadata"]["labels"] = {{"app.kubernetes.io/name", "nodevol"}};
    r = api_->Create(collection, made);
  }
  if (!r.ok()) {
    spdlog::warn("node CA: cannot publish the bundle in ConfigMap {} ({}): {}", where, why, r.ToString());
    return;
  }
  spdlog::info("node CA: ConfigMap {}: {}", where, why);
  std::lock_guard<std::mutex> l(mu_);
  published_ = next;
}

void NodeCa::CheckExpiry(bool leading, std::chrono::system_clock::time_point now) {
  std::shared_ptr<const pki::Ca> signer;
  {
    std::lock_guard<std::mutex> l(mu_);
    signer = secret_ca_;  // the one that signs, or is about to
  }
  size_t retiring = Published().certs.size();
  retiring = retiring > 0 ? retiring - 1 : 0;
  auto not_after = signer->not_after();
  if (hooks_.metrics)
    hooks_.metrics->SetNodeCa(
        static_cast<uint64_t>(std::max<int64_t>(0, std::chrono::system_clock::to_time_t(not_after))), retiring);
  if (not_after - now > config_.warn_expiry) return;
  auto days = std::chrono::duration_cast<std::chrono::hours>(not_after - now).count() / 24;
  std::string message = fmt::format(
      "the CA in Secret {}/{} that signs nodevol's node certificates expires on {:%F %T} UTC ({} days); rotate it "
      "(docs/enrollment.md, \"Rotating the CA\")",
      config_.ns, config_.secret, fmt::gmtime(std::chrono::system_clock::to_time_t(not_after)), days);
  if (now - warned_ >= std::chrono::hours(24)) {
    warned_ = now;
    spdlog::warn("node CA: {}", message);
  }
  if (leading && hooks_.events && now - evented_ >= std::chrono::hours(24)) {
    evented_ = now;
    ObjectRef ref;
    ref.kind = "Secret";
    ref.api_version = "v1";
    ref.ns = config_.ns;
    ref.name = config_.secret;
    hooks_.events->Record(ref, "Warning", "NodeCaExpiring", message);
  }
}

bool NodeCa::Poll(bool leading, const std::optional<std::vector<std::string>>& node_cas) {
  // A leader publishes only from what it read in this pass: one that could
  // not read the Secret might hold a CA the Secret no longer has and undo
  // a rotation; one that could not read the ConfigMap would write over it
  // from an older copy (a CA put back, a time reset, a hand edit undone).
  const bool secret_read = FollowSecret();
  nlohmann::json cm;
  kube::Result r = api_->Get("/api/v1/namespaces/" + config_.ns + "/configmaps/" + config_.configmap, &cm);
  const bool configmap_read = r.ok() || r.code() == kube::Result::Code::kNotFound;
  if (configmap_read) {
    std::lock_guard<std::mutex> l(mu_);
    published_ = r.ok() ? ReadPublishedCa(cm) : PublishedCa{};
  } else {
    spdlog::warn("node CA: cannot read ConfigMap {}/{}: {}", config_.ns, config_.configmap, r.ToString());
  }
  auto now = std::chrono::system_clock::now();
  if (leading && secret_read && configmap_read) Publish(node_cas, now);
  CheckExpiry(leading, now);

  std::lock_guard<std::mutex> l(mu_);
  // The signer: the Secret's CA once the bundle has it first (nodes then
  // renew from it); until then the one before, if this replica holds it.
  // A leader whose publish failed thus never signs with a CA the nodes'
  // bundle does not lead with (they would re-enroll at every pass).
  const std::string secret_fp = pki::Fingerprint(secret_ca_->cert_pem());
  const std::string first = published_.certs.empty() ? "" : published_.certs.front().fingerprint;
  auto signer = secret_ca_;
  if (first != secret_fp && previous_ && first == pki::Fingerprint(previous_->cert_pem())) signer = previous_;
  if (signer != signer_)
    spdlog::info("node CA: signing with {} from now on (was {})", pki::ShortFingerprint(pki::Fingerprint(signer->cert_pem())),
                 pki::ShortFingerprint(pki::Fingerprint(signer_->cert_pem())));
  signer_ = signer;
  std::vector<std::string> held = {secret_fp};
  if (previous_) held.push_back(pki::Fingerprint(previous_->cert_pem()));
  std::string issuer_fp = provisioner::ClientIssuer(published_, held, now, config_.times);
  auto issuer = previous_ && issuer_fp == held.back() && held.size() > 1 ? previous_ : secret_ca_;
  // Trusted: every published CA, the signer, the Secret's and the client
  // issuer (the bundle may not be published yet).
  std::vector<pki::BundleCert> trust = published_.certs;
  for (const auto& ca : {signer_, secret_ca_, issuer}) {
    pki::BundleCert c = AsBundleCert(*ca);
    bool in = false;
    for (const auto& t : trust) in = in || t.fingerprint == c.fingerprint;
    if (!in) trust.push_back(c);
  }
  std::string trust_pem = pki::JoinBundle(trust);
  bool changed = issuer != client_issuer_ || trust_pem != trust_;
  if (issuer != client_issuer_)
    spdlog::info("node CA: this replica's client certificate comes from CA {}{}",
                 pki::ShortFingerprint(pki::Fingerprint(issuer->cert_pem())),
                 issuer == secret_ca_ ? "" : ", the one before the Secret's, until every node trusts the new one");
  client_issuer_ = issuer;
  trust_ = trust_pem;
  return changed;
}

void NodeCa::Start(Hooks hooks) {
  hooks_ = std::move(hooks);
  thread_ = std::thread([this] { Loop(); });
}

void NodeCa::Wake() {
  {
    std::lock_guard<std::mutex> l(mu_);
    wake_ = true;
  }
  cv_.notify_all();
}

void NodeCa::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void NodeCa::Loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait_for(l, config_.poll, [this] { return stopping_ || wake_; });
      if (stopping_) return;
      wake_ = false;
    }
    bool leading = hooks_.leading && hooks_.leading();
    auto node_cas = leading && hooks_.node_cas ? hooks_.node_cas() : std::nullopt;
    if (Poll(leading, node_cas) && hooks_.on_change) hooks_.on_change();
  }
}

}  // namespace nodevol::provisioner
