// Controller: the running provisioner: informers for claims, volumes,
// classes and nodevol nodes; the node registry dialling each node's
// nodevold; a claim queue and a volume queue with their workers
// (ProvisionClaim or ResizeClaim, DeleteReleasedVolume). Start once this replica leads;
// Stop joins everything.
//
// Claims are queued by uid (as the reference library) on every change (a resync of a
// claim given up on is not one: controller/given_up.h); claims that failed
// for room or reachability again when a node's capacity or reachability
// changes, each at most every 15 s (controller/waiting_claims.h); all
// pending claims when a class changes. PVs by name. Node capacity is
// mirrored onto the Node objects, coalesced to one patch per node every
// few seconds. Nodes are found by the label selector (which enrolled nodes
// set on themselves) and dialled where their nodevol.io/endpoint says, if
// it is one of their InternalIPs, else at their first InternalIP and the
// configured port; the node name is the TLS name.
// Stop drops queued keys, lets running ones finish (long waits inside them
// end at once) and ends the sweep between volumes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <optional>
#include <mutex>
#include <thread>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "controller/context.h"
#include "controller/given_up.h"
#include "capacity/storage_capacity.h"
#include "controller/registry_view.h"
#include "enroll/csr_rate_limit.h"
#include "enroll/signer.h"
#include "extender/extender.h"
#include "kube/informer.h"
#include "nodes/node_registry.h"
#include "nodes/tls.h"
#include "queue/work_queue.h"
#include "queue/workers.h"
#include "snapshots/snapshot_controller.h"

namespace nodevol::pki {
class Ca;
}

namespace nodevol::provisioner {

inline constexpr char kStorageNodeLabel[] = "node-restriction.kubernetes.io/nodevol-storage=true";

struct ControllerConfig {
  ControllerOptions options;
  std::string node_selector = "nodevol.io/node=true";
  // The label ("key=value") a cluster admin puts on the nodes that may
  // get new volumes; "" lets any node that announces itself (the
  // default here; nodevol-provisioner's flag defaults to kStorageNodeLabel).
  // Under node-restriction.kubernetes.io/, which the NodeRestriction
  // admission plugin forbids kubelets to set, a node cannot make itself
  // one: the signer refuses others their certificate, and placement (the
  // ledger, capacity objects, the extender) and NFS PVs' node affinity
  // leave them out. The volumes an unmarked node already holds are still
  // deleted, expanded and snapshotted through it.
  std::string storage_node_label;
  int node_port = 9809;
  nodes::TlsClientFiles tls;
  int claim_workers = 4;
  // CreateVolume calls in flight per node: a slow node holds at most this
  // many claim workers (controller/node_load.h). 0: all workers but one,
  // so one is always left for the other nodes' claims.
  int creates_per_node = 0;
  int volume_workers = 4;
  int max_failures = 15;  // the reference library gives up after 15 until the object changes
  std::chrono::milliseconds resync{std::chrono::minutes(15)};
  // Orphan sweep (controller/orphans.h): how often, and how old a volume
  // must be before it can be an orphan. 0 interval = no sweep.
  std::chrono::seconds sweep_interval{600};
  // The grace covers passes of another replica (a leader that lost its
  // lease mid-pass); this replica's own passes are skipped (InFlight).
  std::chrono::seconds orphan_grace{120};
  // At most one capacity patch per Node this often.
  std::chrono::milliseconds mirror_interval{std::chrono::seconds(5)};
  ProvisionerMetrics* metrics = nullptr;  // optional; outlives the controller
  // CSIStorageCapacity objects (capacity/storage_capacity.h): on or off,
  // their namespace, and their ownerReference (null: none).
  bool capacity_objects = true;
  std::string capacity_namespace;  // "": the provisioner's own (main.cc)
  nlohmann::json capacity_owner;
  // The CSI snapshotter's part (snapshots/snapshot_controller.h).
  bool snapshots = true;
  // How long an event may wait while claims are queued (events.h): a
  // user's kubectl describe is at most this late in a burst. 0: never.
  std::chrono::milliseconds event_defer{5000};
  // Node enrollment (enroll/signer.h): with a CA, this replica signs the
  // nodes' serving certificates while it leads; they live at most this long.
  std::function<std::shared_ptr<const pki::Ca>()> node_ca;  // enroll/node_ca.h
  std::chrono::seconds node_cert_lifetime{std::chrono::hours(24 * 30)};
  unsigned node_certs_per_hour = 10;  // per node; 0: no limit (enroll/csr_rate_limit.h)
};

class Controller {
 public:
  Controller(kube::Client* client, ControllerConfig config);
  ~Controller();

  // Starts informers, waits for their first lists (false on timeout or
  // Stop), then the registry and the workers. Once only; thread-safe
  // against Stop, after which it refuses.
  bool Start(std::chrono::milliseconds sync_timeout);
  void Stop();
  // True once started and every informer has synced (readiness).
  bool Ready() const;
  // For scrape-time gauges: the node registry's view (empty before Start)
  // and the keys waiting in each queue.
  std::vector<nodes::NodeState> NodeStates() const {
    return registry_ ? registry_->Snapshot() : std::vector<nodes::NodeState>{};
  }
  size_t ClaimQueueDepth() { return claim_queue_.Len(); }
  // What every storage node says it serves from (nodevol.io/serving-ca,
  // "" when it says nothing); nullopt until the nodes are listed.
  std::optional<std::vector<std::string>> NodeServingCas() const;
  size_t VolumeQueueDepth() { return volume_queue_.Len(); }

  // The scheduler extender over this controller's ledger, once it can
  // answer truthfully: Ready, and every nodevol node heard from (figures
  // or a failed dial) or 15 s since Start, so a new leader does not call
  // nodes it is still dialling unresolvable. Null before.
  Extender* ServingExtender();

 private:
  // How long a new leader waits for each node's first answer (or failure).
  static constexpr std::chrono::seconds kFirstContact{15};
  // How long the extender waits for a pod's claim to reach the claims
  // cache before failing the attempt (kube-scheduler's httpTimeout: 5 s).
  static constexpr std::chrono::seconds kClaimCacheWait{2};
  bool EveryNodeHeard() const;
  void OnNodesChanged();
  // The last nodevol.io/endpoint of each node that was ignored (logged once).
  std::mutex endpoint_mu_;
  std::map<std::string, std::string> ignored_endpoints_;
  // Nodes a cluster admin marked storage nodes (config_.storage_node_label):
  // the only ones placement sees (RegistryView).
  std::set<std::string> storage_nodes_;
  std::set<std::string> unmarked_said_;  // unmarked nodes already warned of
  void OnCapacityChanged(const std::string& node);
  void PokePublisher() {
    if (publisher_) publisher_->Poke();
  }
  // A class changed: every unbound claim, given up or not.
  void RequeueAllPending();
  // Capacity changed: the claims waiting for room that are due.
  void RequeueWaiting();
  void EnqueueClaim(const ClaimView& pvc);
  void ForgetClaim(const ClaimView& pvc);
  void EnqueueVolume(const VolumeView& pv);
  void GaveUpOnClaim(const std::string& uid, bool permanent);
  // The cached claim of this uid; null when gone or replaced.
  std::shared_ptr<const ClaimView> ClaimByUid(const std::string& uid);
  void SweepLoop();
  void MirrorLoop();
  // Classes and nodes first: claims are acted on once these are known.
  std::vector<kube::InformerControl*> Informers() {
    return {classes_.get(), nodes_.get(), volumes_.get(), claims_.get()};
  }
  // Unbound: provision; bound: resize if the request grew.
  Workers::Outcome ProcessClaim(const std::string& uid);

  kube::Client* client_;
  ControllerConfig config_;
  nodes::TlsChannelFactory tls_;
  EventRecorder events_;
  std::unique_ptr<nodes::NodeRegistry> registry_;
  std::unique_ptr<RegistryView> view_;
  std::unique_ptr<CapacityLedger> ledger_;
  std::unique_ptr<CapacityPublisher> publisher_;  // null when capacity objects are off
  std::unique_ptr<Extender> extender_;
  std::chrono::steady_clock::time_point started_at_;
  std::atomic<bool> extender_warm_{false};
  std::atomic<bool> claim_waiter_{false};  // an extender call is waiting for a claim to be cached
  std::unique_ptr<ClaimCache> claims_;
  std::unique_ptr<VolumeCache> volumes_;
  std::unique_ptr<ClassCache> classes_;
  std::unique_ptr<NodeCache> nodes_;
  WorkQueue claim_queue_, volume_queue_;
  std::unique_ptr<Workers> claim_workers_, volume_workers_;
  std::unique_ptr<SnapshotController> snapshots_;
  std::unique_ptr<CsrRateLimit> csr_limit_;
  std::unique_ptr<Signer> signer_;  // null unless config.node_ca
  std::thread sweeper_, mirror_;
  StopFlag stop_;
  std::mutex lifecycle_mu_;  // Start and Stop never overlap
  Attempts attempts_;
  WaitingClaims waiting_;
  std::mutex uid_mu_;
  std::map<std::string, std::string> claim_keys_;  // claim uid -> namespace/name
  InFlight in_flight_;
  DeletedVolumes deleted_;
  std::unique_ptr<NodeLoad> load_;
  GivenUp given_up_;
  std::mutex mirror_mu_;
  std::set<std::string> mirror_dirty_;  // nodes whose capacity changed
  ControllerContext ctx_;
  std::atomic<bool> started_{false};
};

}  // namespace nodevol::provisioner
