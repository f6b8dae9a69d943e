// Ca: nodevol's own certificate authority, kept in a Secret (tls.crt and
// tls.key, PEM). It signs the nodes' serving certificates, from requests
// the provisioner's CheckNodeCsr approved, and the provisioner's own
// client certificate. A new CA is an EC P-256 key and a self-signed certificate.
// Leaves get a random 128-bit serial, a notBefore 5 minutes back (clocks
// of nodes differ; Leaf::backdate), CA:FALSE and only the usages asked for. Move-only;
// const methods are thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace nodevol::pki {

class Ca {
 public:
  struct Leaf {
    std::string common_name;
    std::vector<std::string> dns_names, ips;  // checked already: written as they are
    bool server_auth = false, client_auth = false;
    std::chrono::seconds lifetime{0};
    // notBefore this far back from now (clocks of nodes differ); negative:
    // not yet valid, as a node whose clock is behind sees it.
    std::chrono::seconds backdate{300};
  };

  Ca();
  ~Ca();
  Ca(Ca&&) noexcept;
  Ca& operator=(Ca&&) noexcept;

  static Status Make(const std::string& common_name, std::chrono::seconds lifetime, Ca* out);
  // INVALID_ARGUMENT when the PEM does not parse, the key is not the
  // certificate's, or the certificate is not a CA's.
  static Status Load(const std::string& cert_pem, const std::string& key_pem, Ca* out);

  const std::string& cert_pem() const { return cert_pem_; }
  const std::string& key_pem() const { return key_pem_; }
  std::chrono::system_clock::time_point not_after() const { return not_after_; }

  // A certificate for the public key of the PEM request `request_pem`.
  Status SignRequest(const std::string& request_pem, const Leaf& leaf, std::string* cert_pem) const;
  // A new EC P-256 key and its certificate.
  Status Issue(const Leaf& leaf, std::string* key_pem, std::string* cert_pem) const;

 private:
  struct Keys;
  std::unique_ptr<Keys> keys_;
  std::string cert_pem_, key_pem_;
  std::chrono::system_clock::time_point not_after_{};
};


}  // namespace nodevol::pki
