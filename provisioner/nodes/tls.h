// Mutual TLS for the provisioner's channels to nodevold (docs/tls.md).
//
// The provisioner presents its client certificate and checks that each
// nodevold's certificate chains to the CA bundle and names the node it
// meant to reach: it dials the Node's address with the TLS server name set
// to the Kubernetes node name (the certificate's DNS SAN). One gRPC
// FileWatcherCertificateProvider re-reads the three files every
// refresh_seconds and serves every channel, so a rotated Secret applies to
// new connections without a restart, and a thousand nodes cost one watcher.
#pragma once

#include <grpcpp/channel.h>
#include <grpcpp/security/credentials.h>

#include <memory>
#include <string>

#include "base/status.h"

namespace nodevol::nodes {

struct TlsClientFiles {
  std::string ca;    // CA bundle nodevold certificates must chain to
  std::string cert;  // the provisioner's client certificate (clientAuth)
  std::string key;   // its private key; never logged
  unsigned refresh_seconds = 60;
};

// Reads the files once so a wrong path, a file without PEM, or a key that
// is not the certificate's is INVALID_ARGUMENT naming the file at start
// instead of a handshake failure per node later.
Status CheckTlsClientFiles(const TlsClientFiles& files);

class TlsChannelFactory {
 public:
  explicit TlsChannelFactory(const TlsClientFiles& files);

  // A channel to address ("10.0.0.5:9809") whose peer must present a
  // certificate naming server_name. gRPC's own reconnect backoff is set to
  // 1 s .. 60 s, like the registry's.
  std::shared_ptr<grpc::Channel> Dial(const std::string& address, const std::string& server_name) const;

 private:
  std::shared_ptr<grpc::ChannelCredentials> credentials_;
};

}  // namespace nodevol::nodes
