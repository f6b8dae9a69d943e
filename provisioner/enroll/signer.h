// Signer: the signer nodevol.io/node-serving at work (docs/enrollment.md).
// An informer on the CertificateSigningRequests of that signer (field
// selector spec.signerName) queues each by name; one worker runs SignCsr
// on the cached object, and retries with the queue's backoff when the CSR
// changed meanwhile (409) or the apiserver did not answer. A node's
// addresses are read live from its Node object when its request is
// checked: requests are rare (one per node per renewal), and a node that
// is enrolling need not carry nodevol's node label yet. Only the leader
// runs a Signer.
#pragma once

#include <chrono>
#include <memory>

#include <nlohmann/json.hpp>

#include "enroll/sign_csr.h"
#include "kube/informer.h"
#include "queue/work_queue.h"
#include "queue/workers.h"

namespace nodevol::kube {
class Client;
}

namespace nodevol::provisioner {

class Signer {
 public:
  // config.node_lookup, when unset, reads the Node through `client`, a
  // storage node when it carries storage_label ("key=value"; "" needs none).
  Signer(kube::Client* client, SignerConfig config, const std::string& storage_label = "");
  ~Signer();
  Signer(const Signer&) = delete;
  Signer& operator=(const Signer&) = delete;

  void Start();
  // Stops the informer and the worker; a request being signed finishes.
  void Stop();

 private:
  Workers::Outcome Process(const std::string& name);

  kube::Client* client_;
  SignerConfig config_;
  WorkQueue queue_;
  std::unique_ptr<kube::TypedInformer<nlohmann::json>> informer_;
  std::unique_ptr<Workers> workers_;
};

// Node `name` read from the apiserver: its InternalIP addresses, and
// whether it carries storage_label ("key=value"; "" needs none).
NodeLookup LiveNodeLookup(kube::Api* api, const std::string& storage_label);

}  // namespace nodevol::provisioner
