// unique_ptr for the OpenSSL objects pki/ handles, and PEM in and out of
// strings. For pki/ and the code that checks requests (the provisioner's
// enroll/csr_check.cc).
#pragma once

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <string>
#include <vector>

namespace nodevol::pki {

template <typename T, void (*F)(T*)>
struct Freer {
  void operator()(T* p) const { F(p); }
};
using BioPtr = std::unique_ptr<BIO, Freer<BIO, BIO_free_all>>;
using KeyPtr = std::unique_ptr<EVP_PKEY, Freer<EVP_PKEY, EVP_PKEY_free>>;
using CertPtr = std::unique_ptr<X509, Freer<X509, X509_free>>;
using ReqPtr = std::unique_ptr<X509_REQ, Freer<X509_REQ, X509_REQ_free>>;
using NamesPtr = std::unique_ptr<GENERAL_NAMES, Freer<GENERAL_NAMES, GENERAL_NAMES_free>>;
inline void FreeExtensions(STACK_OF(X509_EXTENSION) * s) { sk_X509_EXTENSION_pop_free(s, X509_EXTENSION_free); }
using ExtensionsPtr = std::unique_ptr<STACK_OF(X509_EXTENSION), Freer<STACK_OF(X509_EXTENSION), FreeExtensions>>;

inline BioPtr ReadBio(const std::string& text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// What `write` put into a memory BIO; "" when it failed.
template <typename Write>
std::string WritePem(Write write) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || write(bio.get()) != 1) return "";
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return n > 0 ? std::string(data, static_cast<size_t>(n)) : "";
}

// The subjectAltName of these DNS names and IP addresses; null when an
// address does not parse.
GENERAL_NAMES* MakeNames(const std::vector<std::string>& dns_names, const std::vector<std::string>& ips);

}  // namespace nodevol::pki
