#include "controller/controller.h"

#include <spdlog/spdlog.h>

#include "controller/delete.h"
#include "controller/node_capacity.h"
#include "controller/orphans.h"
#include "controller/pod_claims.h"
#include "controller/provision.h"
#include "controller/resize.h"

namespace nodevol::provisioner {
namespace {

// Claims, PVs and Nodes are cached as the few fields read here (typed
// views): 10000 PVs and claims took 523 MiB as whole JSON objects, 277
// without their managedFields (bench/provision-bench). Classes are few
// and cached whole, without managedFields.
template <typename T>
std::unique_ptr<kube::TypedInformer<T>> MakeInformer(kube::Client* client, const std::string& path,
                                                     const std::string& selector, const std::string& name,
                                                     std::chrono::milliseconds resync,
                                                     typename kube::TypedInformer<T>::Handlers handlers,
                                                     typename kube::TypedInformer<T>::Decode decode = nullptr) {
  kube::InformerOptions opts;
  opts.name = name;
  opts.resync = resync;
  if (!decode) opts.transform = kube::DropManagedFields;
  return std::make_unique<kube::TypedInformer<T>>(std::make_unique<kube::ClientListWatcher>(client, path, selector),
                                                  std::move(handlers), opts, std::move(decode));
}

}  // namespace

Controller::Controller(kube::Client* client, ControllerConfig config)
    : client_(client),
      config_(std::move(config)),
      tls_(config_.tls),
      events_(client, config_.options.provisioner_name, Clock::Real(), /*async=*/true) {
  {
    const std::string& l = config_.storage_node_label;
    auto eq = l.find('=');
    config_.options.storage_label_key = l.substr(0, eq);
    config_.options.storage_label_value = eq == std::string::npos ? "" : l.substr(eq + 1);
  }
  nodes::NodeRegistry::Options ro;
  ro.dial = [this](const nodes::NodeEndpoint& e) { return tls_.Dial(e.address, e.name); };
  ro.on_change = [this](const std::string& node) { OnCapacityChanged(node); };
  registry_ = std::make_unique<nodes::NodeRegistry>(ro);
  view_ = std::make_unique<RegistryView>(registry_.get(), [this](const std::string& node) {
    std::lock_guard<std::mutex> lock(endpoint_mu_);
    return storage_nodes_.count(node) > 0;
  });
  ledger_ = std::make_unique<CapacityLedger>([this] { return view_->Pools(); });

  auto claim_handlers = ClaimCache::Handlers{
      [this](const ClaimView& o) {
        TrackClaim(ctx_, o);
        EnqueueClaim(o);
      },
      [this](const ClaimView&, const ClaimView& o) {
        TrackClaim(ctx_, o);
        EnqueueClaim(o);
      },
      [this](const ClaimView& o) {
        UntrackClaim(ctx_, o);
        ForgetClaim(o);
      }};
  // Once the cache shows a PV, Attempts need not remember its save.
  auto volume_handlers = VolumeCache::Handlers{
      [this](const VolumeView& o) {
        attempts_.Forget(o.claim_uid);
        EnqueueVolume(o);
      },
      [this](const VolumeView&, const VolumeView& o) { EnqueueVolume(o); },
      [this](const VolumeView& o) { volume_queue_.Forget(o.name); }};
  // A new or changed class may unblock claims waiting for it (a resync,
  // same resourceVersion, is not a change).
  auto class_handlers = ClassCache::Handlers{
      [this](const nlohmann::json&) {
        RequeueAllPending();
        PokePublisher();
      },
      [this](const nlohmann::json& a, const nlohmann::json& b) {
        if (a["metadata"].value("resourceVersion", "") != b["metadata"].value("resourceVersion", ""))
          RequeueAllPending();
      },
      [this](const nlohmann::json&) { PokePublisher(); }};
  // A node's hostname label is its capacity objects' topology.
  auto node_handlers = NodeCache::Handlers{
      [this](const KubeNode&) {
        OnNodesChanged();
        PokePublisher();
      },
      [this](const KubeNode& a, const KubeNode& b) {
        if (a.internal_ips != b.internal_ips || a.endpoint != b.endpoint) OnNodesChanged();
        if (a.Hostname() != b.Hostname()) PokePublisher();
      },
      [this](const KubeNode&) {
        OnNodesChanged();
        PokePublisher();
      }};
  claims_ = MakeInformer<ClaimView>(client, "/api/v1/persistentvolumeclaims", "", "claims", config_.resync,
                                    claim_handlers, DecodeClaim);
  volumes_ = MakeInformer<VolumeView>(client, "/api/v1/persistentvolumes", "", "volumes", config_.resync,
                                      volume_handlers, DecodeVolume);
  classes_ = MakeInformer<nlohmann::json>(client, "/apis/storage.k8s.io/v1/storageclasses", "", "classes", {},
                                          class_handlers);
  nodes_ = MakeInformer<KubeNode>(client, "/api/v1/nodes", config_.node_selector, "nodes", {}, node_handlers,
                                  DecodeNode);

  if (config_.capacity_objects) {
    CapacityPublisher::Options po;
    po.driver = config_.options.provisioner_name;
    po.ns = config_.capacity_namespace;
    po.owner = config_.capacity_owner;
    publisher_ = std::make_unique<CapacityPublisher>(client, classes_.get(), nodes_.get(), ledger_.get(), po);
    ledger_->SetOnChange([this] { PokePublisher(); });
  }

  ctx_.client = client;
  ctx_.claims = claims_.get();
  ctx_.volumes = volumes_.get();
  ctx_.classes = classes_.get();
  ctx_.nodes = nodes_.get();
  ctx_.node_view = view_.get();
  ctx_.events = &events_;
  // A claim's PV before its events (events.h): in a burst they wait while
  // claims are queued, for at most config.event_defer.
  if (config_.event_defer.count() > 0)
    events_.DeferWhile([this] { return claim_queue_.Len() > 0; }, config_.event_defer);
  ctx_.ledger = ledger_.get();
  ctx_.options = config_.options;
  ctx_.metrics = config_.metrics;
  ctx_.attempts = &attempts_;
  ctx_.waiting = &waiting_;
  ctx_.in_flight = &in_flight_;
  ctx_.deleted = &deleted_;
  load_ = std::make_unique<NodeLoad>(config_.creates_per_node > 0 ? config_.creates_per_node
                                                                  : std::max(1, config_.claim_workers - 1));
  ctx_.load = load_.get();
  ctx_.stop = &stop_;
  extender_ = std::make_unique<Extender>(
      ledger_.get(),
      [this](const std::string& ns, const std::vector<std::string>& names) {
        // A claim kube-scheduler has and our cache not yet: our watch is
        // behind by the events in flight, milliseconds but more under load.
        // Waiting here a little spares the pod a failed attempt and its
        // backoff (kube-scheduler calls the extender for one pod at a time).
        const auto start = std::chrono::steady_clock::now();
        auto found = PendingPodClaims(ctx_, ns, names);
        if (found.unknown.empty()) return found;
        // One caller waits at a time: a wait holds one of the extender's
        // few handler threads, and kube-scheduler asks about one pod at a
        // time, so other waiters are a flood of made-up claims (issue 57,
        // item 4). They get their answer, "not cached yet", at once.
        bool idle = false;
        if (!claim_waiter_.compare_exchange_strong(idle, true)) return found;
        const std::string first = ns + "/" + found.unknown.front();
        while (!found.unknown.empty() && std::chrono::steady_clock::now() < start + kClaimCacheWait &&
               stop_.WaitFor(std::chrono::milliseconds(10)))
          found = PendingPodClaims(ctx_, ns, names);
        claim_waiter_ = false;
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
        if (found.unknown.empty()) spdlog::debug("extender: claim {} reached the cache after {} ms", first, ms.count());
        return found;
      },
      config_.options.policy);
  if (config_.node_ca) {
    SignerConfig sc;
    sc.ca = config_.node_ca;
    sc.max_lifetime = config_.node_cert_lifetime;
    sc.events = &events_;
    csr_limit_ = std::make_unique<CsrRateLimit>(config_.node_certs_per_hour);
    sc.rate_limit = csr_limit_.get();
    signer_ = std::make_unique<Signer>(client, sc, config_.storage_node_label);
  }
  if (config_.snapshots) {
    SnapshotController::Options so;
    so.resync = config_.resync;
    so.max_failures = config_.max_failures;
    snapshots_ = std::make_unique<SnapshotController>(client, &ctx_, so);
  }
}

Extender* Controller::ServingExtender() {
  if (!Ready()) return nullptr;
  if (extender_warm_) return extender_.get();
  bool heard = std::chrono::steady_clock::now() - started_at_ > kFirstContact || EveryNodeHeard();
  if (!heard) return nullptr;
  extender_warm_ = true;
  return extender_.get();
}

Controller::~Controller() { Stop(); }

bool Controller::EveryNodeHeard() const {
  for (const auto& n : registry_->Snapshot())
    if (!n.reachable && n.last_error.empty() && n.pools.empty()) return false;
  return true;
}

bool Controller::Start(std::chrono::milliseconds sync_timeout) {
  std::lock_guard<std::mutex> life(lifecycle_mu_);
  auto stopping = [this] { return stop_.IsSet(); };
  if (stopping()) return false;
  for (auto* i : Informers()) i->Start();
  for (auto* i : Informers())
    if (!i->WaitForSync(sync_timeout)) return false;
  if (stopping()) return false;
  OnNodesChanged();
  // Claims are placed once every node has answered or failed once (at most
  // kFirstContact): a pass reads a node's volumes before it places a claim
  // (SeedAttempts), so an earlier leader's create there is finished there,
  // not made again on a node that happened to answer first.
  const auto contact_by = std::chrono::steady_clock::now() + kFirstContact;
  while (!EveryNodeHeard() && std::chrono::steady_clock::now() < contact_by)
    if (!stop_.WaitFor(std::chrono::milliseconds(50))) return false;
  claim_workers_ = std::make_unique<Workers>(
      "claim", &claim_queue_, config_.claim_workers, config_.max_failures,
      [this](const std::string& k) { return ProcessClaim(k); },
      [this](const std::string& k, bool permanent) { GaveUpOnClaim(k, permanent); });
  volume_workers_ =
      std::make_unique<Workers>("volume", &volume_queue_, config_.volume_workers, config_.max_failures,
                                [this](const std::string& k) { return DeleteReleasedVolume(ctx_, k); });
  if (config_.sweep_interval.count() > 0) sweeper_ = std::thread([this] { SweepLoop(); });
  mirror_ = std::thread([this] { MirrorLoop(); });
  if (publisher_) publisher_->Start();
  if (snapshots_) snapshots_->Start();
  if (signer_) signer_->Start();
  started_at_ = std::chrono::steady_clock::now();
  started_ = true;
  spdlog::info("controller started: {} claim workers, {} volume workers, nodes labelled {}", config_.claim_workers,
               config_.volume_workers, config_.node_selector);
  if (config_.storage_node_label.empty())
    spdlog::warn("--storage-node-label is empty: any node that enrolls and announces itself may serve volumes; "
                 "docs/enrollment.md says how an admin marks storage nodes instead");
  return true;
}

void Controller::Stop() {
  started_ = false;
  // Queued keys are dropped at once (a stopping replica starts nothing
  // new); long waits in running passes and the sweep end now.
  stop_.Set();
  claim_queue_.ShutDown();
  volume_queue_.ShutDown();
  // The recorder outlives the claim queue its predicate reads.
  events_.DeferWhile(nullptr, {});
  if (publisher_) publisher_->Stop();
  if (snapshots_) snapshots_->Stop();
  if (signer_) signer_->Stop();
  // Informers next (no new work; a Start waiting for them to sync gives
  // up), then the workers finish their keys.
  for (auto* i : Informers())
    if (i) i->Stop();
  std::lock_guard<std::mutex> life(lifecycle_mu_);
  // Again: a Start that raced the first round may have started them.
  for (auto* i : Informers())
    if (i) i->Stop();
  if (sweeper_.joinable()) sweeper_.join();
  if (mirror_.joinable()) mirror_.join();
  claim_workers_.reset();
  volume_workers_.reset();
  if (registry_) registry_->Stop();
}

Workers::Outcome Controller::ProcessClaim(const std::string& uid) {
  auto pvc = ClaimByUid(uid);
  if (!pvc) return Workers::Outcome::kDone;  // gone, or made again: another uid
  if (!pvc->volume_name.empty()) return ResizeClaim(ctx_, pvc->Key());
  return ProvisionClaim(ctx_, pvc->Key(), uid);
}

void Controller::SweepLoop() {
  while (stop_.WaitFor(config_.sweep_interval)) {
    auto gone = SweepOrphans(ctx_, config_.orphan_grace);
    if (!gone.empty()) spdlog::warn("orphan sweep deleted {} volume(s)", gone.size());
  }
}

// A dir pool's free bytes move with every write on its filesystem: one
// patch per node per interval at most, with the latest figures.
void Controller::MirrorLoop() {
  while (stop_.WaitFor(config_.mirror_interval)) {
    std::set<std::string> dirty;
    {
      std::lock_guard<std::mutex> lock(mirror_mu_);
      dirty.swap(mirror_dirty_);
    }
    for (const auto& node : dirty) {
      nodes::NodeState state;
      auto obj = nodes_->Get(node);
      if (!obj || !registry_->Get(node, &state)) continue;
      auto r = MirrorCapacity(client_, *obj, state);
      if (!r.ok()) spdlog::warn("node {}: mirroring capacity: {}", node, r.ToString());
    }
  }
}

bool Controller::Ready() const {
  return started_ && claims_->HasSynced() && volumes_->HasSynced() && classes_->HasSynced() && nodes_->HasSynced();
}

std::optional<std::vector<std::string>> Controller::NodeServingCas() const {
  if (!started_ || !nodes_->HasSynced()) return std::nullopt;
  std::vector<std::string> out;
  // Storage nodes only: the signer gives no other a certificate, so a node
  // that merely labelled itself cannot hold an old CA in the bundle.
  for (const auto& n : nodes_->List())
    if (n->HasLabel(config_.storage_node_label)) out.push_back(n->serving_ca);
  return out;
}

void Controller::OnNodesChanged() {
  std::vector<nodes::NodeEndpoint> eps;
  const bool required = !config_.storage_node_label.empty();
  for (const auto& n : nodes_->List()) {
    std::string ignored;
    std::string address = DialAddress(*n, config_.node_port, &ignored);
    bool storage = n->HasLabel(config_.storage_node_label);
    {
      std::lock_guard<std::mutex> lock(endpoint_mu_);
      if (ignored.empty()) ignored_endpoints_.erase(n->name);
      else if (ignored_endpoints_[n->name] != n->endpoint) spdlog::warn("node {}: {}", n->name, ignored);
      if (!ignored.empty()) ignored_endpoints_[n->name] = n->endpoint;
      // Said once per change: an upgrade from before the label, or an
      // admin who took it away, leaves such nodes.
      if (storage && !storage_nodes_.count(n->name) && required)
        spdlog::info("node {}: a storage node ({}): new volumes may be placed on it", n->name, config_.storage_node_label);
      if (!storage && (storage_nodes_.count(n->name) || !unmarked_said_.count(n->name)))
        spdlog::warn("node {} runs nodevold but is not marked a storage node: no new volume goes to it (those it "
                     "holds are still served); to let it, run: kubectl label node {} {}",
                     n->name, n->name, config_.storage_node_label);
      if (storage) storage_nodes_.insert(n->name), unmarked_said_.erase(n->name);
      else storage_nodes_.erase(n->name), unmarked_said_.insert(n->name);
    }
    if (!address.empty()) eps.push_back({n->name, address});
  }
  registry_->SetNodes(eps);
}

void Controller::OnCapacityChanged(const std::string& node) {
  if (!node.empty()) {
    std::lock_guard<std::mutex> lock(mirror_mu_);
    mirror_dirty_.insert(node);
  }
  PokePublisher();
  // Room may have appeared: claims that waited for it get another pass.
  RequeueWaiting();
}

void Controller::RequeueWaiting() {
  for (const auto& key : waiting_.TakeDue()) claim_queue_.Add(key);
}

void Controller::RequeueAllPending() {
  given_up_.Clear();
  for (const auto& pvc : claims_->List())
    if (pvc->volume_name.empty()) {
      TrackClaim(ctx_, *pvc);  // its class may have been unknown until now
      EnqueueClaim(*pvc);
    }
}

// The claim queue, the given-up and waiting sets are keyed by uid, as the
// reference library's: a claim deleted and made again under the same name
// is another item, never the old one's retries or backoff.
void Controller::EnqueueClaim(const ClaimView& pvc) {
  if (pvc.uid.empty()) return;
  {
    std::lock_guard<std::mutex> lock(uid_mu_);
    claim_keys_[pvc.uid] = pvc.Key();
  }
  // Bound claims too: a grown request is a resize (controller/resize.h).
  if (!given_up_.ShouldQueue(pvc.uid, pvc.resource_version)) return;
  claim_queue_.Add(pvc.uid);
}

void Controller::ForgetClaim(const ClaimView& pvc) {
  {
    std::lock_guard<std::mutex> lock(uid_mu_);
    claim_keys_.erase(pvc.uid);
  }
  claim_queue_.Forget(pvc.uid);
  waiting_.Remove(pvc.uid);
  given_up_.Remove(pvc.uid);
  attempts_.Forget(pvc.uid);
}

std::shared_ptr<const ClaimView> Controller::ClaimByUid(const std::string& uid) {
  std::string key;
  {
    std::lock_guard<std::mutex> lock(uid_mu_);
    auto it = claim_keys_.find(uid);
    if (it == claim_keys_.end()) return nullptr;
    key = it->second;
  }
  auto pvc = claims_->Get(key);
  return pvc && pvc->uid == uid ? pvc : nullptr;
}

void Controller::GaveUpOnClaim(const std::string& uid, bool permanent) {
  auto pvc = ClaimByUid(uid);
  if (!pvc) return;
  given_up_.Add(uid, pvc->resource_version);
  // A permanent error does not go away with room.
  if (permanent) waiting_.Remove(uid);
}

void Controller::EnqueueVolume(const VolumeView& pv) {
  if (!config_.options.Serves(pv.provisioned_by)) return;
  volume_queue_.Add(pv.name);
}

}  // namespace nodevol::provisioner
