// ClientCertificate: nodevol-provisioner's own client certificate, issued
// by a node CA the nodes trust (NodeCa::ClientIssuer: the signer's, or
// during a rotation the one before), so no certificate has to be made by
// hand for it either. Files in one directory (a tmpfs in the pod):
// tls.key, tls.crt (client auth only, CN nodevol-provisioner) and ca.crt
// (the CAs nodevold's certificates may chain to, NodeCa::TrustBundle). They are what
// nodes::TlsClientFiles names; gRPC's file watcher re-reads them, so a
// renewal applies to new connections without a restart.
//
// Issue writes a fresh pair at once; Start renews it on a thread at two
// thirds of its lifetime, or at once after Reissue (the issuer or the
// trusted CAs changed). Every replica holds its own. Key first, then
// certificate, each replaced whole.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/status.h"
#include "nodes/tls.h"

namespace nodevol::pki {
class Ca;
}

namespace nodevol::provisioner {

class ClientCertificate {
 public:
  using Issuer = std::function<std::shared_ptr<const pki::Ca>()>;
  using Trust = std::function<std::string()>;
  ClientCertificate(Issuer issuer, Trust trust, std::string dir, std::chrono::seconds lifetime);
  ~ClientCertificate();
  ClientCertificate(const ClientCertificate&) = delete;
  ClientCertificate& operator=(const ClientCertificate&) = delete;

  nodes::TlsClientFiles files() const;
  Status Issue();
  void Start();
  void Reissue();
  void Stop();

 private:
  void Loop();

  Issuer issuer_;
  Trust trust_;
  std::string dir_;
  std::chrono::seconds lifetime_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false, reissue_ = false;
  std::chrono::system_clock::time_point issued_;
  std::thread thread_;
};

}  // namespace nodevol::provisioner
