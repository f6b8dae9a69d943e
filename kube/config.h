// Config: where the apiserver is and how to authenticate to it, loaded from
// kubeconfig files (out of cluster) or from a pod's service account (in
// cluster).
//
// kubeconfig follows kubectl: KUBECONFIG may list several files (':'
// separated); the first file to define a cluster, user or context name, or
// current-context, wins; relative paths resolve against the directory of the
// file that holds them; *-data fields are base64 PEM. `exec` and
// `auth-provider` credential plugins are refused. Errors name the file and
// the key. Secrets (tokens, keys) are never put into error messages.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace nodevol::kube {

struct Config {
  std::string server;  // https://host:port, no trailing slash
  // Trust: a CA bundle file or its PEM bytes (at most one set); neither
  // means the system trust store.
  std::string ca_file;
  std::string ca_data;
  // Client certificate and key: files or PEM bytes.
  std::string client_cert_file;
  std::string client_cert_data;
  std::string client_key_file;
  std::string client_key_data;
  // Bearer token, given directly or as a file re-read as it rotates.
  std::string token;
  std::string token_file;
  bool insecure_skip_tls_verify = false;
  std::string tls_server_name;  // name to verify the server certificate against
  std::string ns = "default";   // the context's or the pod's namespace
};

// The kubeconfig files to read: $KUBECONFIG's entries, or ~/.kube/config.
std::vector<std::string> DefaultKubeconfigFiles();

// Loads `files` (merged as kubectl does; files that do not exist are skipped
// unless none exists). `context` overrides current-context when not empty.
Status LoadKubeconfig(const std::vector<std::string>& files, const std::string& context, Config* out);

// In-cluster: `root` replaces "/" before var/run/secrets/... (tests), and
// host/port normally come from KUBERNETES_SERVICE_HOST/PORT.
struct InClusterSource {
  std::string root = "/";
  std::string host;
  std::string port;
  // Fills host and port from the environment.
  static InClusterSource FromEnvironment();
};
Status LoadInCluster(const InClusterSource& source, Config* out);

}  // namespace nodevol::kube
