#include "pki/bundle.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/sha.h>

#include "pki/openssl_ptr.h"

namespace nodevol::pki {
namespace {

std::string FingerprintOf(X509* cert) {
  unsigned char* der = nullptr;
  int n = i2d_X509(cert, &der);
  if (n <= 0) return "";
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(der, static_cast<size_t>(n), md);
  OPENSSL_free(der);
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : md) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

}  // namespace

std::vector<BundleCert> SplitBundle(const std::string& bundle_pem) {
  std::vector<BundleCert> out;
  BioPtr bio = ReadBio(bundle_pem);
  while (bio) {
    CertPtr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (!cert) break;
    BundleCert c;
    c.pem = WritePem([&](BIO* b) { return PEM_write_bio_X509(b, cert.get()); });
    c.fingerprint = FingerprintOf(cert.get());
    if (c.pem.empty() || c.fingerprint.empty() || !ReadValidity(c.pem, &c.validity).ok()) continue;
    bool seen = false;
    for (const auto& o : out) seen = seen || o.fingerprint == c.fingerprint;
    if (!seen) out.push_back(std::move(c));
  }
  ERR_clear_error();
  return out;
}

std::string Fingerprint(const std::string& pem) {
  BioPtr bio = ReadBio(pem);
  CertPtr cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  ERR_clear_error();
  return cert ? FingerprintOf(cert.get()) : "";
}

std::string JoinBundle(const std::vector<BundleCert>& certs) {
  std::string out;
  for (const auto& c : certs) out += c.pem;
  return out;
}

const BundleCert* IssuerIn(const std::vector<BundleCert>& bundle, const std::string& cert_pem,
                           std::chrono::system_clock::time_point at) {
  for (const auto& c : bundle)
    if (VerifyChain(cert_pem, c.pem, at).ok()) return &c;
  return nullptr;
}

}  // namespace nodevol::pki
