#include "nodes/tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <grpcpp/support/channel_arguments.h>

#include <fstream>
#include <iterator>

namespace nodevol::nodes {
namespace {

Status ReadFile(const char* what, const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument(std::string(what) + " " + path + ": cannot read the file");
  out->assign(std::istreambuf_iterator<char>(in), {});
  return Status::Ok();
}

using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;

BioPtr MemBio(const std::string& data) {
  return BioPtr(BIO_new_mem_buf(data.data(), static_cast<int>(data.size())), &BIO_free);
}

}  // namespace

Status CheckTlsClientFiles(const TlsClientFiles& files) {
  std::string ca, cert, key;
  NODEVOL_RETURN_IF_ERROR(ReadFile("TLS CA bundle", files.ca, &ca));
  NODEVOL_RETURN_IF_ERROR(ReadFile("TLS client certificate", files.cert, &cert));
  NODEVOL_RETURN_IF_ERROR(ReadFile("TLS client key", files.key, &key));
  if (files.refresh_seconds == 0) return Status::InvalidArgument("TLS refresh interval must be at least 1 s");

  BioPtr ca_bio = MemBio(ca);
  std::unique_ptr<X509, decltype(&X509_free)> ca_x(PEM_read_bio_X509(ca_bio.get(), nullptr, nullptr, nullptr),
                                                    &X509_free);
  BioPtr cert_bio = MemBio(cert);
  std::unique_ptr<X509, decltype(&X509_free)> x(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr),
                                                 &X509_free);
  BioPtr key_bio = MemBio(key);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> pkey(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  OPENSSL_cleanse(key.data(), key.size());
  ERR_clear_error();
  if (!ca_x) return Status::InvalidArgument("TLS CA bundle " + files.ca + ": no PEM certificate in the file");
  if (!x) return Status::InvalidArgument("TLS client certificate " + files.cert + ": no PEM certificate in the file");
  if (!pkey) return Status::InvalidArgument("TLS client key " + files.key + ": no unencrypted PEM private key in the file");
  if (X509_check_private_key(x.get(), pkey.get()) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument("TLS client key " + files.key + " does not belong to the certificate " + files.cert);
  }
  return Status::Ok();
}

TlsChannelFactory::TlsChannelFactory(const TlsClientFiles& files) {
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      files.key, files.cert, files.ca, files.refresh_seconds);
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(provider);
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  credentials_ = grpc::experimental::TlsCredentials(options);
}

std::shared_ptr<grpc::Channel> TlsChannelFactory::Dial(const std::string& address,
                                                       const std::string& server_name) const {
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride(server_name);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 60000);
  // Its own connection even when another node's channel has the same
  // address (an address that moved from one Node to another).
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, credentials_, args);
}

}  // namespace nodevol::nodes
