// Credentials of nodevold's TCP listener: mutual TLS, where every client
// must present a certificate that chains to the configured CA (the
// provisioner's), and nodevold presents its own.
//
// CheckTlsFiles reads the three PEM files once so a wrong path, a file that
// is not PEM, or a key that does not belong to the certificate stops the
// start with a message naming the option. MutualTlsServerCredentials then
// hands the paths to gRPC's FileWatcherCertificateProvider, which re-reads
// them every refresh_seconds: replaced certificates and keys (and CA
// bundles) apply to new connections without a restart. The key's contents
// are never logged. A chain to the CA is not enough: the CA signs for
// nodes and kube-scheduler too, so the listener also pins who may call.
#pragma once

#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace nodevol {

struct TlsFiles {
  std::string ca;    // --tls-ca
  std::string cert;  // --tls-cert
  std::string key;   // --tls-key
};

// What CheckTlsFiles learnt, for the start-up log line.
struct TlsFacts {
  std::string subject;    // of the first certificate in --tls-cert
  std::string not_after;  // its expiry, e.g. "Nov 21 15:50:30 2027 GMT"
  int ca_certificates = 0;
  bool expired = false;
  bool key_readable_by_others = false;
};

Status CheckTlsFiles(const TlsFiles& files, TlsFacts* facts);

// The handshake also checks the client's certificate against
// `client_names` (pki/client_identity.h: clientAuth, and a CN or DNS name
// among them): any other certificate the CA signed (kube-scheduler's, a
// no-EKU leaf) fails the handshake, and nodevold logs once per certificate
// what it carries and what would pass. Empty: any certificate the CA
// signed.
std::shared_ptr<grpc::ServerCredentials> MutualTlsServerCredentials(const TlsFiles& files, unsigned refresh_seconds,
                                                                    std::vector<std::string> client_names);

}  // namespace nodevol
