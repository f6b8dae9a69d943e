#include "pki/client_identity.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <algorithm>

#include "pki/openssl_ptr.h"

namespace nodevol::pki {
namespace {

std::string CommonName(X509* cert) {
  X509_NAME* subject = X509_get_subject_name(cert);
  int i = subject ? X509_NAME_get_index_by_NID(subject, NID_commonName, -1) : -1;
  if (i < 0) return "";
  ASN1_STRING* s = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i));
  if (!s) return "";
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)), ASN1_STRING_length(s));
}

std::vector<std::string> DnsNames(X509* cert) {
  std::vector<std::string> out;
  NamesPtr names(static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr)));
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(names.get(), i);
    if (g->type != GEN_DNS) continue;
    const ASN1_IA5STRING* s = g->d.dNSName;
    out.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)), ASN1_STRING_length(s));
  }
  return out;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

Status CheckClientIdentity(X509* cert, const std::vector<std::string>& accepted, std::string* who) {
  if (!cert) return Status::PermissionDenied("no client certificate");
  // X509_get_extension_flags computes the cached extensions first.
  const bool has_eku = (X509_get_extension_flags(cert) & EXFLAG_XKUSAGE) != 0;
  if (!has_eku || !(X509_get_extended_key_usage(cert) & XKU_SSL_CLIENT))
    return Status::PermissionDenied("the client certificate's extendedKeyUsage does not name clientAuth");
  std::vector<std::string> names;
  std::string cn = CommonName(cert);
  if (!cn.empty()) names.push_back(cn);
  for (auto& d : DnsNames(cert)) names.push_back(std::move(d));
  if (accepted.empty()) {
    *who = names.empty() ? "" : names.front();
    return Status::Ok();
  }
  for (const auto& n : names)
    if (std::find(accepted.begin(), accepted.end(), n) != accepted.end()) {
      *who = n;
      return Status::Ok();
    }
  return Status::PermissionDenied("the client certificate names " + (names.empty() ? "nobody" : Join(names)) +
                                  "; accepted here: " + Join(accepted));
}

Status CheckClientIdentityPem(const std::string& pem, const std::vector<std::string>& accepted, std::string* who) {
  BioPtr bio = ReadBio(pem);
  CertPtr cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  ERR_clear_error();
  if (!cert) return Status::InvalidArgument("no PEM client certificate");
  return CheckClientIdentity(cert.get(), accepted, who);
}

}  // namespace nodevol::pki
