#include "enroll/client_certificate.h"

#include <spdlog/spdlog.h>

#include "base/atomic_file.h"
#include "base/backoff.h"
#include "pki/ca.h"

namespace nodevol::provisioner {

ClientCertificate::ClientCertificate(Issuer issuer, Trust trust, std::string dir, std::chrono::seconds lifetime)
    : issuer_(std::move(issuer)), trust_(std::move(trust)), dir_(std::move(dir)), lifetime_(lifetime) {}

ClientCertificate::~ClientCertificate() { Stop(); }

nodes::TlsClientFiles ClientCertificate::files() const {
  nodes::TlsClientFiles f;
  f.ca = dir_ + "/ca.crt";
  f.cert = dir_ + "/tls.crt";
  f.key = dir_ + "/tls.key";
  return f;
}

Status ClientCertificate::Issue() {
  std::string key, cert;
  std::shared_ptr<const pki::Ca> ca = issuer_();
  if (!ca) return Status::FailedPrecondition("no node CA to issue the provisioner's client certificate from");
  NODEVOL_RETURN_IF_ERROR(ca->Issue({"nodevol-provisioner", {}, {}, /*server_auth=*/false, /*client_auth=*/true, lifetime_},
                                     &key, &cert));
  // A tmpfs: durability buys nothing, a new pair is issued at start.
  NODEVOL_RETURN_IF_ERROR(EnsureDir(dir_, 0700));
  NODEVOL_RETURN_IF_ERROR(WriteFileAtomic(dir_, "ca.crt", trust_(), /*durable=*/false, 0644));
  NODEVOL_RETURN_IF_ERROR(WriteFileAtomic(dir_, "tls.key", key, /*durable=*/false, 0600));
  NODEVOL_RETURN_IF_ERROR(WriteFileAtomic(dir_, "tls.crt", cert, /*durable=*/false, 0644));
  std::lock_guard<std::mutex> l(mu_);
  issued_ = std::chrono::system_clock::now();
  return Status::Ok();
}

void ClientCertificate::Start() { thread_ = std::thread([this] { Loop(); }); }

void ClientCertificate::Reissue() {
  {
    std::lock_guard<std::mutex> l(mu_);
    reissue_ = true;
  }
  cv_.notify_all();
}

void ClientCertificate::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ClientCertificate::Loop() {
  Backoff backoff(std::chrono::seconds(1), std::chrono::minutes(1), 0.2);
  std::unique_lock<std::mutex> l(mu_);
  auto due = issued_ + lifetime_ * 2 / 3;
  for (;;) {
    cv_.wait_until(l, due, [this] { return stopping_ || reissue_; });
    if (stopping_) return;
    reissue_ = false;
    l.unlock();
    Status st = Issue();
    l.lock();
    if (st.ok()) {
      backoff.Reset();
      due = issued_ + lifetime_ * 2 / 3;
      spdlog::info("renewed the provisioner's client certificate in {} ({} s)", dir_, lifetime_.count());
    } else {
      due = std::chrono::system_clock::now() + backoff.Next();
      spdlog::error("cannot renew the provisioner's client certificate in {}: {}", dir_, st.message());
    }
  }
}

}  // namespace nodevol::provisioner
