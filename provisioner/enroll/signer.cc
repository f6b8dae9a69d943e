#include "enroll/signer.h"

#include <spdlog/spdlog.h>

#include "kube/client.h"
#include "kube/fields.h"
#include "kube/list_watcher.h"
#include "nodes/kube_node.h"

namespace nodevol::provisioner {
namespace {

constexpr char kCsrs[] = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
// Gives up on a request after this many failed turns (it is queued again
// at its next change, and at the informer's resync).
constexpr int kMaxFailures = 15;
constexpr std::chrono::minutes kResync{10};

}  // namespace

NodeLookup LiveNodeLookup(kube::Api* api, const std::string& storage_label) {
  return [api, storage_label](const std::string& name, NodeFacts* out) {
    nlohmann::json node;
    kube::Result r = api->Get("/api/v1/nodes/" + name, &node);
    if (r.code() == kube::Result::Code::kNotFound) return Status::NotFound("no Node " + name);
    if (!r.ok()) return Status::Unavailable("read Node " + name + ": " + r.ToString());
    KubeNode n = DecodeNode(node);
    out->internal_ips = n.internal_ips;
    out->storage_node = n.HasLabel(storage_label);
    out->storage_label = storage_label;
    return Status::Ok();
  };
}

Signer::Signer(kube::Client* client, SignerConfig config, const std::string& storage_label)
    : client_(client), config_(std::move(config)) {
  if (!config_.node_lookup) config_.node_lookup = LiveNodeLookup(client_, storage_label);
  auto enqueue = [this](const nlohmann::json& csr) { queue_.Add(kube::Str(kube::Obj(csr, "metadata"), "name")); };
  kube::TypedInformer<nlohmann::json>::Handlers handlers{
      enqueue, [enqueue](const nlohmann::json&, const nlohmann::json& csr) { enqueue(csr); }, nullptr};
  kube::InformerOptions options;
  options.name = "certificatesigningrequests";
  options.resync = kResync;
  options.transform = [](nlohmann::json& obj) {
    if (obj.contains("metadata") && obj["metadata"].is_object()) obj["metadata"].erase("managedFields");
  };
  informer_ = std::make_unique<kube::TypedInformer<nlohmann::json>>(
      std::make_unique<kube::ClientListWatcher>(client_, kCsrs, "", std::string("spec.signerName=") + kNodeServingSigner),
      handlers, options);
}

Signer::~Signer() { Stop(); }

void Signer::Start() {
  informer_->Start();
  workers_ = std::make_unique<Workers>("csr", &queue_, 1, kMaxFailures,
                                       [this](const std::string& name) { return Process(name); });
  spdlog::info("signing node serving certificates (signer {})", kNodeServingSigner);
}

void Signer::Stop() {
  queue_.ShutDown();
  if (informer_) informer_->Stop();
  workers_.reset();
}

Workers::Outcome Signer::Process(const std::string& name) {
  auto csr = informer_->Get(name);
  if (!csr) return Workers::Outcome::kDone;  // deleted meanwhile
  SignOutcome outcome;
  Status st = SignCsr(client_, config_, *csr, &outcome);
  if (st.ok()) return Workers::Outcome::kDone;
  spdlog::warn("certificate request {}: {}", name, st.message());
  return Workers::Outcome::kRetry;
}

}  // namespace nodevol::provisioner
