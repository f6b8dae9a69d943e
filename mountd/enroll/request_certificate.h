// RequestCertificate: one enrollment through the Kubernetes CSR API, made
// as the node itself (kubelet's credentials, user system:node:<node>).
// A new EC P-256 key, and a CertificateSigningRequest of signer
// nodevol.io/node-serving for CN=<node>, DNS name <node> and the node's
// InternalIP addresses, usages digital signature and server auth only.
// Then the request is read until the signer answers:
//  - a certificate: checked (it is the key's and names the node) and
//    returned with the key;
//  - Denied or Failed: PERMISSION_DENIED with the signer's reason and
//    message (the request is not made again by this call);
//  - the request deleted unanswered (the apiserver's cleaner removes
//    requests pending for a day): a new key and request.
// Reads back off from 250 ms to 30 s while nobody answers, as when the
// provisioner is down. `sleep` waits and returns false when the caller is
// stopping, which ends the call with CANCELLED.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace nodevol::kube {
class Api;
}

namespace nodevol::enroll {

inline constexpr char kSignerName[] = "nodevol.io/node-serving";

struct CertificateAsk {
  std::string node;
  std::vector<std::string> ips;
  std::chrono::seconds lifetime{0};  // expirationSeconds; 0: the signer's choice
};

using Sleep = std::function<bool(std::chrono::milliseconds)>;

Status RequestCertificate(kube::Api* api, const CertificateAsk& ask, const Sleep& sleep, std::string* key_pem,
                          std::string* cert_pem);

}  // namespace nodevol::enroll
