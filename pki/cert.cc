#include "pki/cert.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509_vfy.h>

#include <ctime>

#include "pki/openssl_ptr.h"

namespace nodevol::pki {
namespace {

bool ToTimePoint(const ASN1_TIME* t, std::chrono::system_clock::time_point* out) {
  std::tm tm{};
  if (!t || ASN1_TIME_to_tm(t, &tm) != 1) return false;
  *out = std::chrono::system_clock::from_time_t(timegm(&tm));
  return true;
}

}  // namespace

GENERAL_NAMES* MakeNames(const std::vector<std::string>& dns_names, const std::vector<std::string>& ips) {
  NamesPtr names(sk_GENERAL_NAME_new_null());
  if (!names) return nullptr;
  for (const auto& d : dns_names) {
    GENERAL_NAME* g = GENERAL_NAME_new();
    ASN1_IA5STRING* s = ASN1_IA5STRING_new();
    if (!g || !s || ASN1_STRING_set(s, d.data(), static_cast<int>(d.size())) != 1) {
      GENERAL_NAME_free(g);
      ASN1_IA5STRING_free(s);
      return nullptr;
    }
    GENERAL_NAME_set0_value(g, GEN_DNS, s);
    sk_GENERAL_NAME_push(names.get(), g);
  }
  for (const auto& ip : ips) {
    ASN1_OCTET_STRING* a = a2i_IPADDRESS(ip.c_str());
    GENERAL_NAME* g = a ? GENERAL_NAME_new() : nullptr;
    if (!g) {
      ASN1_OCTET_STRING_free(a);
      return nullptr;
    }
    GENERAL_NAME_set0_value(g, GEN_IPADD, a);
    sk_GENERAL_NAME_push(names.get(), g);
  }
  return names.release();
}

Status ReadValidity(const std::string& pem, Validity* out) {
  BioPtr bio = ReadBio(pem);
  CertPtr cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert) return Status::InvalidArgument("no PEM certificate");
  if (!ToTimePoint(X509_get0_notBefore(cert.get()), &out->not_before) ||
      !ToTimePoint(X509_get0_notAfter(cert.get()), &out->not_after))
    return Status::InvalidArgument("the certificate's validity cannot be read");
  return Status::Ok();
}

Status ReadCertificate(const std::string& cert_pem, const std::string& key_pem, CertFacts* out) {
  BioPtr bio = ReadBio(cert_pem);
  CertPtr cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert) return Status::InvalidArgument("no PEM certificate");
  *out = CertFacts{};
  if (!ToTimePoint(X509_get0_notBefore(cert.get()), &out->validity.not_before) ||
      !ToTimePoint(X509_get0_notAfter(cert.get()), &out->validity.not_after))
    return Status::InvalidArgument("the certificate's validity cannot be read");
  NamesPtr names(static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert.get(), NID_subject_alt_name, nullptr, nullptr)));
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(names.get(), i);
    if (g->type == GEN_DNS) {
      const ASN1_IA5STRING* s = g->d.dNSName;
      out->dns_names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)), ASN1_STRING_length(s));
    } else if (g->type == GEN_IPADD) {
      char text[INET6_ADDRSTRLEN] = {};
      int len = g->d.iPAddress->length;
      if ((len == 4 || len == 16) && inet_ntop(len == 4 ? AF_INET : AF_INET6, g->d.iPAddress->data, text, sizeof text))
        out->ips.emplace_back(text);
    }
  }
  if (key_pem.empty()) return Status::Ok();
  BioPtr kbio = ReadBio(key_pem);
  KeyPtr key(kbio ? PEM_read_bio_PrivateKey(kbio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key) return Status::InvalidArgument("no PEM private key");
  if (X509_check_private_key(cert.get(), key.get()) != 1)
    return Status::InvalidArgument("the private key is not the certificate's");
  return Status::Ok();
}

Status VerifyChain(const std::string& cert_pem, const std::string& bundle_pem,
                   std::chrono::system_clock::time_point at) {
  BioPtr bio = ReadBio(cert_pem);
  CertPtr cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert) return Status::InvalidArgument("no PEM certificate");
  std::unique_ptr<X509_STORE, Freer<X509_STORE, X509_STORE_free>> store(X509_STORE_new());
  BioPtr bundle = ReadBio(bundle_pem);
  int cas = 0;
  while (bundle) {
    CertPtr ca(PEM_read_bio_X509(bundle.get(), nullptr, nullptr, nullptr));
    if (!ca) break;
    if (X509_STORE_add_cert(store.get(), ca.get()) == 1) ++cas;
  }
  ERR_clear_error();
  if (cas == 0) return Status::InvalidArgument("no CA certificate in the bundle");
  std::unique_ptr<X509_STORE_CTX, Freer<X509_STORE_CTX, X509_STORE_CTX_free>> ctx(X509_STORE_CTX_new());
  if (!ctx || X509_STORE_CTX_init(ctx.get(), store.get(), cert.get(), nullptr) != 1)
    return Status::Internal("cannot set up a certificate check");
  // PARTIAL_CHAIN: a bundle certificate that is not self-signed ends the
  // chain too (issue 60 item 2: an intermediate as the operator's CA was
  // never accepted, and every node re-enrolled on every pass).
  X509_STORE_CTX_set_flags(ctx.get(), X509_V_FLAG_PARTIAL_CHAIN);
  X509_STORE_CTX_set_time(ctx.get(), 0, std::chrono::system_clock::to_time_t(at));
  if (X509_verify_cert(ctx.get()) != 1)
    return Status::FailedPrecondition(std::string("the certificate does not chain to the CA bundle: ") +
                                      X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get())));
  return Status::Ok();
}

Status MakeKeyAndRequest(const std::string& common_name, const std::vector<std::string>& dns_names,
                         const std::vector<std::string>& ips, std::string* key_pem, std::string* request_pem) {
  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return Status::Internal("cannot make an EC P-256 key");
  ReqPtr req(X509_REQ_new());
  if (!req || X509_REQ_set_version(req.get(), 0) != 1 || X509_REQ_set_pubkey(req.get(), key.get()) != 1)
    return Status::Internal("cannot make a certificate request");
  X509_NAME* subject = X509_REQ_get_subject_name(req.get());
  if (X509_NAME_add_entry_by_NID(subject, NID_commonName, MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1, 0) != 1)
    return Status::InvalidArgument("cannot put \"" + common_name + "\" in a certificate's subject");
  NamesPtr names(MakeNames(dns_names, ips));
  if (!names) return Status::InvalidArgument("a name or address of the request is not valid");
  ExtensionsPtr exts(sk_X509_EXTENSION_new_null());
  X509_EXTENSION* san = X509V3_EXT_i2d(NID_subject_alt_name, 0, names.get());
  bool ok = exts && san && sk_X509_EXTENSION_push(exts.get(), san) > 0;
  if (ok) san = nullptr;
  ok = ok && X509_REQ_add_extensions(req.get(), exts.get()) == 1;
  X509_EXTENSION_free(san);
  if (!ok) return Status::Internal("cannot add the names to the certificate request");
  if (X509_REQ_sign(req.get(), key.get(), EVP_sha256()) <= 0) return Status::Internal("cannot sign the certificate request");
  *request_pem = WritePem([&](BIO* b) { return PEM_write_bio_X509_REQ(b, req.get()); });
  *key_pem = WritePem([&](BIO* b) { return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr); });
  if (request_pem->empty() || key_pem->empty()) return Status::Internal("cannot write the key or the request as PEM");
  return Status::Ok();
}

}  // namespace nodevol::pki
