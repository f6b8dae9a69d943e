#include "server/tls_credentials.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <grpcpp/security/tls_certificate_verifier.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <map>
#include <mutex>
#include <iterator>
#include <memory>
#include <vector>

#include "pki/client_identity.h"

namespace nodevol {
namespace {

Status ReadFile(const char* option, const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument("--" + std::string(option) + " " + path + ": cannot read the file");
  out->assign(std::istreambuf_iterator<char>(in), {});
  return Status::Ok();
}

using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;
using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;
using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

BioPtr MemBio(const std::string& data) {
  return BioPtr(BIO_new_mem_buf(data.data(), static_cast<int>(data.size())), &BIO_free);
}

// Every PEM certificate in data, in order.
std::vector<X509Ptr> Certificates(const std::string& data) {
  std::vector<X509Ptr> out;
  BioPtr bio = MemBio(data);
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) out.emplace_back(x, &X509_free);
  ERR_clear_error();  // the read that ends the loop leaves "no start line"
  return out;
}

std::string Text(const ASN1_TIME* t) {
  BioPtr bio(BIO_new(BIO_s_mem()), &BIO_free);
  ASN1_TIME_print(bio.get(), t);
  char* p = nullptr;
  long n = BIO_get_mem_data(bio.get(), &p);
  return std::string(p, n);
}

std::string Subject(X509* x) {
  char buf[512] = {};
  X509_NAME_oneline(X509_get_subject_name(x), buf, sizeof buf);
  return buf;
}

}  // namespace

Status CheckTlsFiles(const TlsFiles& files, TlsFacts* facts) {
  std::string ca, cert, key;
  NODEVOL_RETURN_IF_ERROR(ReadFile("tls-ca", files.ca, &ca));
  NODEVOL_RETURN_IF_ERROR(ReadFile("tls-cert", files.cert, &cert));
  NODEVOL_RETURN_IF_ERROR(ReadFile("tls-key", files.key, &key));

  std::vector<X509Ptr> cas = Certificates(ca);
  if (cas.empty()) return Status::InvalidArgument("--tls-ca " + files.ca + ": no PEM certificate in the file");
  std::vector<X509Ptr> chain = Certificates(cert);
  if (chain.empty()) return Status::InvalidArgument("--tls-cert " + files.cert + ": no PEM certificate in the file");

  BioPtr bio = MemBio(key);
  KeyPtr pkey(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  ERR_clear_error();
  // Overwrite our copy of the key; gRPC reads the file itself.
  OPENSSL_cleanse(key.data(), key.size());
  if (!pkey)
    return Status::InvalidArgument("--tls-key " + files.key + ": no unencrypted PEM private key in the file");
  if (X509_check_private_key(chain[0].get(), pkey.get()) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument("--tls-key " + files.key + " does not belong to the certificate in --tls-cert " +
                                   files.cert);
  }

  facts->subject = Subject(chain[0].get());
  facts->not_after = Text(X509_get0_notAfter(chain[0].get()));
  facts->ca_certificates = static_cast<int>(cas.size());
  facts->expired = X509_cmp_current_time(X509_get0_notAfter(chain[0].get())) <= 0 ||
                   X509_cmp_current_time(X509_get0_notBefore(chain[0].get())) >= 0;
  struct stat st;
  facts->key_readable_by_others = ::stat(files.key.c_str(), &st) == 0 && (st.st_mode & 077) != 0;
  return Status::Ok();
}

namespace {

// Runs in the handshake, after the chain to the CA is verified: the peer's
// certificate must also be one of the pinned identities, or the handshake
// fails. A per-call check let a certificate the CA signed for another
// purpose finish the handshake and hold a connection that the relay then
// trusted for good (its calls were refused, its slot kept). Verdicts are
// kept per certificate, and a refusal is logged once per certificate.
class PinnedClients : public grpc::experimental::ExternalCertificateVerifier {
 public:
  explicit PinnedClients(std::vector<std::string> names) : names_(std::move(names)) {}

  bool Verify(grpc::experimental::TlsCustomVerificationCheckRequest* request, std::function<void(grpc::Status)>,
              grpc::Status* sync_status) override {
    std::string pem(request->peer_cert().data(), request->peer_cert().size());
    Status st;
    {
      std::lock_guard lock(mu_);
      auto it = seen_.find(pem);
      if (it != seen_.end()) {
        st = it->second;
      } else {
        std::string who;
        st = pki::CheckClientIdentityPem(pem, names_, &who);
        if (seen_.size() >= 64) seen_.clear();
        seen_.emplace(pem, st);
        if (!st.ok()) spdlog::warn("tls listener: refused a client certificate: {} (--tls-client-names)", st.message());
      }
    }
    *sync_status = st.ok() ? grpc::Status::OK
                           : grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                          st.message() + " (nodevold --tls-client-names; docs/tls.md)");
    return true;  // done, synchronously
  }
  void Cancel(grpc::experimental::TlsCustomVerificationCheckRequest*) override {}

 private:
  const std::vector<std::string> names_;
  std::mutex mu_;
  std::map<std::string, Status> seen_;  // certificate PEM -> verdict
};

}  // namespace

std::shared_ptr<grpc::ServerCredentials> MutualTlsServerCredentials(const TlsFiles& files, unsigned refresh_seconds,
                                                                    std::vector<std::string> client_names) {
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(files.key, files.cert,
                                                                                       files.ca, refresh_seconds);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  if (!client_names.empty())
    options.set_certificate_verifier(
        grpc::experimental::ExternalCertificateVerifier::Create<PinnedClients>(std::move(client_names)));
  return grpc::experimental::TlsServerCredentials(options);
}

}  // namespace nodevol
