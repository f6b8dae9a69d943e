#include "enroll/enroller.h"

#include <fmt/chrono.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/atomic_file.h"
#include "base/backoff.h"
#include "base/host_port.h"
#include "base/names.h"
#include "kube/api.h"
#include "kube/fields.h"
#include "pki/bundle.h"

namespace nodevol::enroll {
namespace {

bool IsWildcard(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "[::]" || host == "::";
}

// Addresses in one spelling each (the Node's status may say FD00::1, the
// certificate says fd00::1), sorted.
std::string AsText(const std::vector<std::string>& v) {
  std::vector<std::string> s;
  for (const std::string& ip : v) {
    std::string c = CanonicalIp(ip);
    s.push_back(c.empty() ? ip : c);
  }
  std::sort(s.begin(), s.end());
  std::string out;
  for (const auto& x : s) out += (out.empty() ? "" : ",") + x;
  return out;
}

// When a certificate received at `received` is renewed: at two thirds of
// its lifetime counted from then (the signer backdates notBefore).
std::chrono::system_clock::time_point RenewAt(std::chrono::system_clock::time_point received,
                                              const pki::CertFacts& facts) {
  return received + (facts.validity.not_after - received) * 2 / 3;
}

}  // namespace

Enroller::Enroller(kube::Api* api, EnrollConfig config, std::function<void()> on_ready)
    : api_(api), config_(std::move(config)), on_ready_(std::move(on_ready)) {
  pki::CertFacts facts;
  std::chrono::system_clock::time_point written;
  Status st = config_.files.Load(config_.node, &facts, &written);
  if (st.ok()) {
    ready_at_start_ = true;
    held_ = facts;
    issued_ = std::min(written, std::chrono::system_clock::now());
    have_cert_ = true;
  } else if (st.code() != Status::Code::kNotFound) {
    spdlog::warn("enrollment: the enrolled files cannot serve ({}); enrolling again", st.message());
  }
}

Enroller::~Enroller() { Stop(); }

void Enroller::Start() { thread_ = std::thread([this] { Loop(); }); }

void Enroller::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Enroller::Announce(const std::string& host, int port) {
  {
    std::lock_guard<std::mutex> l(mu_);
    announce_host_ = host;
    announce_port_ = port;
    wake_ = true;
  }
  cv_.notify_all();
}

std::chrono::system_clock::time_point Enroller::not_after() const {
  std::lock_guard<std::mutex> l(mu_);
  return have_cert_ ? held_.validity.not_after : std::chrono::system_clock::time_point{};
}

bool Enroller::SleepFor(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait_for(l, d, [this] { return stopping_ || wake_; });
  wake_ = false;
  return !stopping_;
}

void Enroller::Loop() {
  Backoff backoff(std::chrono::seconds(1), std::chrono::minutes(1), 0.2);
  // A node installed before the provisioner waits quietly: the same
  // complaint is a warning the first time and every tenth, debug between.
  std::string last_error;
  int repeats = 0;
  for (;;) {
    auto next = std::chrono::system_clock::now() + config_.recheck;
    Status st = Pass(&next);
    std::chrono::milliseconds wait;
    if (st.ok()) {
      backoff.Reset();
      last_error.clear();
      wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - std::chrono::system_clock::now());
      wait = std::max(wait, std::chrono::milliseconds(1000));
    } else if (st.code() == Status::Code::kCancelled) {
      return;
    } else {
      wait = backoff.Next();
      // A refusal is a decision, not a hiccup: asking again at once would
      // pile up requests (a denied one stays an hour). Once per recheck.
      if (st.code() == Status::Code::kPermissionDenied)
        wait = std::max(wait, std::chrono::duration_cast<std::chrono::milliseconds>(config_.recheck));
      repeats = st.message() == last_error ? repeats + 1 : 0;
      last_error = st.message();
      spdlog::log(repeats % 10 == 0 ? spdlog::level::warn : spdlog::level::debug, "enrollment: {}; again in {} s",
                  st.message(), wait.count() / 1000);
    }
    if (!SleepFor(wait)) return;
  }
}

Status Enroller::CheckIdentity() {
  if (identity_checked_) return Status::Ok();
  // Who the apiserver says we are (SelfSubjectReview, GA in 1.28): a node
  // name that is not the kubeconfig's would only be denied by the signer.
  nlohmann::json review = {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "SelfSubjectReview"}}, out;
  kube::Result r = api_->Create("/apis/authentication.k8s.io/v1/selfsubjectreviews", review, &out);
  if (!r.ok()) {
    if (r.IsTransient()) return Status::Unavailable("ask the apiserver who this node is: " + r.ToString());
    spdlog::info("enrollment: cannot ask the apiserver who this node is ({}); going on", r.ToString());
    identity_checked_ = true;
    return Status::Ok();
  }
  std::string user = kube::Str(kube::Obj(kube::Obj(out, "status"), "userInfo"), "username");
  if (user != "system:node:" + config_.node)
    return Status::FailedPrecondition("the kubeconfig authenticates as \"" + user + "\", not system:node:" +
                                      config_.node + ": give nodevold kubelet's kubeconfig (--enroll-kubeconfig), "
                                      "and a --node-name that is kubelet's");
  identity_checked_ = true;
  return Status::Ok();
}

Status Enroller::Pass(std::chrono::system_clock::time_point* next) {
  NODEVOL_RETURN_IF_ERROR(CheckIdentity());

  nlohmann::json cm;
  kube::Result r = api_->Get("/api/v1/namespaces/" + config_.ca_namespace + "/configmaps/" + config_.ca_configmap, &cm);
  if (!r.ok())
    return Status::Unavailable("read the CA bundle, ConfigMap " + config_.ca_namespace + "/" + config_.ca_configmap +
                               " (published by nodevol-provisioner run with --node-ca-secret): " + r.ToString());
  std::string bundle = kube::Str(kube::Obj(cm, "data"), "ca.crt");
  pki::CertFacts ca_facts;
  if (Status st = pki::ReadCertificate(bundle, "", &ca_facts); !st.ok())
    return Status::FailedPrecondition("ConfigMap " + config_.ca_namespace + "/" + config_.ca_configmap +
                                      " has no usable ca.crt: " + st.message());
  bool changed = false;
  NODEVOL_RETURN_IF_ERROR(config_.files.WriteCaBundle(bundle, &changed));
  if (changed) spdlog::info("enrollment: CA bundle written to {}", config_.files.tls().ca);

  nlohmann::json node;
  r = api_->Get("/api/v1/nodes/" + config_.node, &node);
  if (!r.ok()) return Status::Unavailable("read Node " + config_.node + ": " + r.ToString());
  std::vector<std::string> ips = kube::NodeInternalIps(node);

  pki::CertFacts held;
  std::chrono::system_clock::time_point issued;
  bool have;
  {
    std::lock_guard<std::mutex> l(mu_);
    held = held_;
    issued = issued_;
    have = have_cert_;
  }
  auto now = std::chrono::system_clock::now();
  auto renew_at = RenewAt(issued, held);
  std::string why;
  std::string cert_pem;
  if (!have) why = "none held";
  else if (now >= renew_at) why = "two thirds of its lifetime have passed";
  else if (ReadWholeFile(config_.files.tls().cert, &cert_pem).ok())
    why = WhyNotServing(cert_pem, held, bundle, ips, now);
  if (why.empty() && AsText(held.ips) != AsText(ips)) why = "the Node's addresses are now " + AsText(ips);
  if (!why.empty()) {
    spdlog::info("enrollment: a serving certificate is needed ({})", why);
    std::string key, cert;
    const Pending& p = pending_;
    if (p.cert.empty() || now >= RenewAt(p.received, p.facts) ||
        !WhyNotServing(p.cert, p.facts, bundle, ips, now).empty()) {
      auto sleep = [this](std::chrono::milliseconds d) { return SleepFor(d); };
      NODEVOL_RETURN_IF_ERROR(RequestCertificate(api_, {config_.node, ips, config_.lifetime}, sleep, &key, &cert));
      pki::CertFacts facts;
      NODEVOL_RETURN_IF_ERROR(pki::ReadCertificate(cert, key, &facts));
      pending_ = {key, cert, facts, std::chrono::system_clock::now()};
    } else {
      spdlog::info("enrollment: writing the certificate the signer gave earlier again, not asking for another");
      key = pending_.key;
      cert = pending_.cert;
    }
    // A pair that cannot be written (ENOSPC, EROFS) is kept here and
    // written again on the next pass: a new request on every backoff
    // step was signed and thrown away each time (issue 60 item 5).
    if (Status st = config_.files.WritePair(key, cert); !st.ok())
      return Status(st.code(), "write the signed certificate (kept, and written again on the next pass): " +
                                   st.message());
    held = pending_.facts;
    issued = pending_.received;
    pending_ = {};
    {
      std::lock_guard<std::mutex> l(mu_);
      held_ = held;
      issued_ = issued;
      have_cert_ = true;
    }
    auto t = std::chrono::system_clock::to_time_t(held.validity.not_after);
    spdlog::info("enrollment: serving certificate for {} written to {}, valid until {:%F %T} UTC", config_.node,
                 config_.files.tls().cert, fmt::gmtime(t));
    renew_at = RenewAt(issued, held);
  }
  if (!ready_at_start_ && !ready_called_) {
    ready_called_ = true;
    if (on_ready_) on_ready_();
  }
  // Which published CA the certificate served now comes from, for the
  // leader to know when an old one may leave the bundle (ca_rotation.h).
  std::string serving_ca;
  if (std::string served; ReadWholeFile(config_.files.tls().cert, &served).ok()) {
    auto certs = pki::SplitBundle(bundle);
    if (const pki::BundleCert* issuer = pki::IssuerIn(certs, served, std::max(now, held.validity.not_before)))
      serving_ca = issuer->fingerprint;
  }
  NODEVOL_RETURN_IF_ERROR(AnnounceOn(node, ips, serving_ca));
  *next = std::min(renew_at, now + config_.recheck);
  return Status::Ok();
}

std::string Enroller::WhyNotServing(const std::string& cert_pem, const pki::CertFacts& facts,
                                    const std::string& bundle, const std::vector<std::string>& ips,
                                    std::chrono::system_clock::time_point now) {
  // Checked at its notBefore when that is still to come: a node whose clock
  // is behind the signer's by more than the backdate would otherwise take
  // a certificate that is not yet valid for one from another CA and ask
  // again on every pass (issue 60 item 3). It serves with it: the peers'
  // clocks are the signer's.
  // Checked against the first certificate of the bundle, the CA that signs
  // now: the others are CAs being retired (pki/bundle.h), trusted but not
  // to be renewed from.
  auto certs = pki::SplitBundle(bundle);
  if (certs.empty()) return "the published bundle holds no CA";
  const auto at = std::max(now, facts.validity.not_before);
  Status chain = pki::VerifyChain(cert_pem, certs.front().pem, at);
  if (!chain.ok()) {
    if (certs.size() > 1 && pki::IssuerIn(certs, cert_pem, at))
      return "the CA is being rotated: it was signed by one being retired";
    return "the published CA is no longer the one that signed it: " + chain.message();
  }
  if (now < facts.validity.not_before && !clock_behind_said_) {
    clock_behind_said_ = true;
    spdlog::warn("enrollment: the serving certificate is valid only from {} s from now: this node's clock is "
                 "behind the signer's (check its time synchronisation); keeping it",
                 std::chrono::duration_cast<std::chrono::seconds>(facts.validity.not_before - now).count());
  }
  if (AsText(facts.ips) != AsText(ips)) return "the Node's addresses are now " + AsText(ips);
  return "";
}

Status Enroller::AnnounceOn(const nlohmann::json& node, const std::vector<std::string>& ips,
                            const std::string& serving_ca) {
  std::string host;
  int port;
  {
    std::lock_guard<std::mutex> l(mu_);
    host = announce_host_;
    port = announce_port_;
  }
  if (port == 0) return Status::Ok();  // the listener is not up yet
  if (IsWildcard(host)) {
    if (ips.empty()) return Status::Unavailable("Node " + config_.node + " has no InternalIP address to announce");
    host = ips.front();
  }
  std::string endpoint = JoinHostPort(host, port);
  const auto& meta = kube::Obj(node, "metadata");
  auto labels = kube::StringMap(kube::Obj(meta, "labels"));
  auto annotations = kube::StringMap(kube::Obj(meta, "annotations"));
  nlohmann::json patch_meta = nlohmann::json::object();
  if (!config_.label_key.empty() && labels[config_.label_key] != config_.label_value)
    patch_meta["labels"] = {{config_.label_key, config_.label_value}};
  if (annotations[kEndpointAnnotation] != endpoint) patch_meta["annotations"][kEndpointAnnotation] = endpoint;
  if (!serving_ca.empty() && annotations[kServingCaAnnotation] != serving_ca)
    patch_meta["annotations"][kServingCaAnnotation] = serving_ca;
  if (patch_meta.empty()) return Status::Ok();
  kube::Result r = api_->MergePatch("/api/v1/nodes/" + config_.node, {{"metadata", patch_meta}});
  if (!r.ok()) return Status::Unavailable("announce on Node " + config_.node + ": " + r.ToString());
  spdlog::info("enrollment: announced on Node {}: {}={}{}{}", config_.node, kEndpointAnnotation, endpoint,
               config_.label_key.empty() ? "" : ", label " + config_.label_key + "=" + config_.label_value,
               serving_ca.empty() ? "" : ", serving from CA " + pki::ShortFingerprint(serving_ca));
  return Status::Ok();
}

}  // namespace nodevol::enroll
