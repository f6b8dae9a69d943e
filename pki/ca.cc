#include "pki/ca.h"

#include <openssl/bn.h>
#include <openssl/pem.h>
#include <openssl/rand.h>

#include "pki/cert.h"
#include "pki/openssl_ptr.h"

namespace nodevol::pki {

struct Ca::Keys {
  CertPtr cert;
  KeyPtr key;
};

namespace {

Status AddExtension(X509* cert, X509V3_CTX* ctx, int nid, const char* value) {
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, ctx, nid, value);
  bool ok = ext && X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok ? Status::Ok() : Status::Internal(std::string("cannot add extension ") + OBJ_nid2sn(nid));
}

// A certificate for `subject_key`, signed by `issuer_key` as `issuer`
// (null: self-signed, a CA).
Status Build(const Ca::Leaf& leaf, EVP_PKEY* subject_key, X509* issuer, EVP_PKEY* issuer_key, CertPtr* out) {
  const bool is_ca = issuer == nullptr;
  CertPtr cert(X509_new());
  if (!cert || X509_set_version(cert.get(), 2) != 1) return Status::Internal("cannot make a certificate");
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) return Status::Internal("no random serial number");
  serial[0] &= 0x7f;  // positive
  std::unique_ptr<BIGNUM, Freer<BIGNUM, BN_free>> bn(BN_bin2bn(serial, sizeof serial, nullptr));
  if (!bn || !BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(cert.get())))
    return Status::Internal("cannot set the serial number");
  if (!X509_gmtime_adj(X509_getm_notBefore(cert.get()), -static_cast<long>(leaf.backdate.count())) ||
      !X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(leaf.lifetime.count())))
    return Status::Internal("cannot set the validity");
  X509_NAME* subject = X509_get_subject_name(cert.get());
  if (X509_NAME_add_entry_by_NID(subject, NID_commonName, MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(leaf.common_name.c_str()), -1, -1, 0) != 1)
    return Status::InvalidArgument("cannot put \"" + leaf.common_name + "\" in a certificate's subject");
  if (X509_set_issuer_name(cert.get(), is_ca ? subject : X509_get_subject_name(issuer)) != 1 ||
      X509_set_pubkey(cert.get(), subject_key) != 1)
    return Status::Internal("cannot set the issuer or the key");

  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, is_ca ? cert.get() : issuer, cert.get(), nullptr, nullptr, 0);
  NODEVOL_RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, NID_basic_constraints, is_ca ? "critical,CA:TRUE" : "critical,CA:FALSE"));
  NODEVOL_RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, NID_key_usage,
                                       is_ca ? "critical,keyCertSign,cRLSign,digitalSignature"
                                             : "critical,digitalSignature,keyEncipherment"));
  NODEVOL_RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, NID_subject_key_identifier, "hash"));
  NODEVOL_RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, NID_authority_key_identifier, "keyid:always"));
  if (!is_ca) {
    // A leaf says what it is for: one that asks for neither is a caller's
    // mistake, not a client certificate by default.
    if (!leaf.server_auth && !leaf.client_auth)
      return Status::InvalidArgument("certificate for \"" + leaf.common_name +
                                     "\" asks for no usage: set server_auth, client_auth or both");
    std::string eku = leaf.server_auth && leaf.client_auth ? "serverAuth,clientAuth"
                      : leaf.server_auth                   ? "serverAuth"
                                                           : "clientAuth";
    NODEVOL_RETURN_IF_ERROR(AddExtension(cert.get(), &ctx, NID_ext_key_usage, eku.c_str()));
  }
  if (!leaf.dns_names.empty() || !leaf.ips.empty()) {
    NamesPtr names(MakeNames(leaf.dns_names, leaf.ips));
    if (!names) return Status::InvalidArgument("a name or address of the certificate is not valid");
    if (X509_add1_ext_i2d(cert.get(), NID_subject_alt_name, names.get(), 0, X509V3_ADD_DEFAULT) != 1)
      return Status::Internal("cannot add the names to the certificate");
  }
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) <= 0) return Status::Internal("cannot sign the certificate");
  *out = std::move(cert);
  return Status::Ok();
}

std::string CertText(X509* cert) {
  return WritePem([&](BIO* b) { return PEM_write_bio_X509(b, cert); });
}

}  // namespace

Ca::Ca() = default;
Ca::~Ca() = default;
Ca::Ca(Ca&&) noexcept = default;
Ca& Ca::operator=(Ca&&) noexcept = default;

Status Ca::Make(const std::string& common_name, std::chrono::seconds lifetime, Ca* out) {
  auto keys = std::make_unique<Keys>();
  keys->key.reset(EVP_EC_gen("P-256"));
  if (!keys->key) return Status::Internal("cannot make an EC P-256 key");
  Leaf self{common_name, {}, {}, false, false, lifetime};
  NODEVOL_RETURN_IF_ERROR(Build(self, keys->key.get(), nullptr, keys->key.get(), &keys->cert));
  std::string cert = CertText(keys->cert.get());
  std::string key = WritePem(
      [&](BIO* b) { return PEM_write_bio_PrivateKey(b, keys->key.get(), nullptr, nullptr, 0, nullptr, nullptr); });
  if (cert.empty() || key.empty()) return Status::Internal("cannot write the CA as PEM");
  return Load(cert, key, out);
}

Status Ca::Load(const std::string& cert_pem, const std::string& key_pem, Ca* out) {
  auto keys = std::make_unique<Keys>();
  BioPtr cb = ReadBio(cert_pem), kb = ReadBio(key_pem);
  keys->cert.reset(cb ? PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!keys->cert) return Status::InvalidArgument("the CA certificate is not a PEM certificate");
  keys->key.reset(kb ? PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!keys->key) return Status::InvalidArgument("the CA key is not a PEM private key");
  if (X509_check_private_key(keys->cert.get(), keys->key.get()) != 1)
    return Status::InvalidArgument("the CA key is not the key of the CA certificate");
  if (X509_check_ca(keys->cert.get()) < 1) return Status::InvalidArgument("the CA certificate is not a CA's (CA:TRUE)");
  Validity v;
  NODEVOL_RETURN_IF_ERROR(ReadValidity(cert_pem, &v));
  out->keys_ = std::move(keys);
  out->cert_pem_ = CertText(out->keys_->cert.get());
  out->key_pem_ = key_pem;
  out->not_after_ = v.not_after;
  return Status::Ok();
}

Status Ca::SignRequest(const std::string& request_pem, const Leaf& leaf, std::string* cert_pem) const {
  if (!keys_) return Status::FailedPrecondition("no CA loaded");
  BioPtr bio = ReadBio(request_pem);
  ReqPtr req(bio ? PEM_read_bio_X509_REQ(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  EVP_PKEY* key = req ? X509_REQ_get0_pubkey(req.get()) : nullptr;
  if (!key || X509_REQ_verify(req.get(), key) != 1)
    return Status::InvalidArgument("not a certificate request signed by its own key");
  CertPtr cert;
  NODEVOL_RETURN_IF_ERROR(Build(leaf, key, keys_->cert.get(), keys_->key.get(), &cert));
  *cert_pem = CertText(cert.get());
  return cert_pem->empty() ? Status::Internal("cannot write the certificate as PEM") : Status::Ok();
}

Status Ca::Issue(const Leaf& leaf, std::string* key_pem, std::string* cert_pem) const {
  if (!keys_) return Status::FailedPrecondition("no CA loaded");
  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return Status::Internal("cannot make an EC P-256 key");
  CertPtr cert;
  NODEVOL_RETURN_IF_ERROR(Build(leaf, key.get(), keys_->cert.get(), keys_->key.get(), &cert));
  *cert_pem = CertText(cert.get());
  *key_pem = WritePem(
      [&](BIO* b) { return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr); });
  if (cert_pem->empty() || key_pem->empty()) return Status::Internal("cannot write the key or certificate as PEM");
  return Status::Ok();
}

}  // namespace nodevol::pki
