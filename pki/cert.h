// What nodevol reads of a certificate and makes for a request: the
// validity and names of the first certificate in a PEM text (a renewal is
// due at two thirds of it), and a new EC P-256 key with a PKCS#10 request
// naming a node, as nodevold sends it to the signer.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/status.h"

namespace nodevol::pki {

struct Validity {
  std::chrono::system_clock::time_point not_before{}, not_after{};
};
// INVALID_ARGUMENT when `pem` holds no certificate.
Status ReadValidity(const std::string& pem, Validity* out);

// What a node checks of the certificate it holds before serving with it:
// its validity and the DNS names and IP addresses of its subjectAltName.
struct CertFacts {
  Validity validity;
  std::vector<std::string> dns_names, ips;
};
// INVALID_ARGUMENT when `cert_pem` holds no certificate, or when `key_pem`
// is not empty and is not the private key of that certificate.
Status ReadCertificate(const std::string& cert_pem, const std::string& key_pem, CertFacts* out);

// OK when the first certificate of `cert_pem` chains to the certificates
// in `bundle_pem` at time `at` (any purpose); FAILED_PRECONDITION with
// OpenSSL's reason otherwise. Every certificate of the bundle is a trust
// anchor as it is, a self-signed root or not: an operator's CA may be an
// intermediate of their own root, and the bundle then holds just it. A
// node re-enrolls when the CA it holds a certificate from is no longer
// the published one.
Status VerifyChain(const std::string& cert_pem, const std::string& bundle_pem,
                   std::chrono::system_clock::time_point at = std::chrono::system_clock::now());

// A new EC P-256 key (PKCS#8 PEM) and a request signed by it for subject
// CN=`common_name` with these DNS names and IP addresses.
Status MakeKeyAndRequest(const std::string& common_name, const std::vector<std::string>& dns_names,
                         const std::vector<std::string>& ips, std::string* key_pem, std::string* request_pem);

}  // namespace nodevol::pki
