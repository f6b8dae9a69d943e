// CapacityPublisher: tells kube-scheduler, through its own API, which nodes
// have room (docs/scheduling.md, "Capacity objects"). One CSIStorageCapacity
// (storage.k8s.io/v1) per StorageClass whose provisioner is the driver name
// and per node running nodevold:
//   nodeTopology       matchLabels {kubernetes.io/hostname: <the node's>}
//   storageClassName   the class
//   capacity           the room the ledger gives one new volume of the
//   maximumVolumeSize  class there (0: the node lacks the pool, the pool
//                      is of another kind, or nodevold is unreachable)
// kube-scheduler rejects a node for a claim of the class when no object
// matches it with enough room, once the CSIDriver of that name says
// storageCapacity: true (deploy/base/csidriver.yaml). So every node gets
// its object at once, even while its figures are unknown (capacity 0).
//
// Objects live in one namespace, carry the labels external-provisioner
// uses (csi.storage.k8s.io/drivername, .../managed-by) and, when given,
// an ownerReference (the provisioner's Deployment), so uninstalling the
// provisioner removes them. Names are derived from class and node, so a
// second leader finds and updates the first one's objects, never
// duplicates them. Objects of a class or node that went are deleted.
//
// A node this replica has no figures for yet (just started leading, still
// dialling) keeps its object's value for `unknown_grace`, so a failover
// does not turn every node away for the seconds the dialling takes; past
// that a node still unheard drops to 0 like an unreachable one (its
// nodevold never answered this leader: issue 57, item 10). A new node's
// object starts at 0. Writes follow Poke() after `debounce`, only for objects whose figures
// changed, at most `writes_per_second`; the objects are listed again every
// `resync` (and after a failed write) to correct drift. Run only while
// leading. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "capacity/ledger.h"
#include "kube/api.h"
#include "kube/informer.h"
#include "nodes/kube_node.h"

namespace nodevol::provisioner {

class CapacityPublisher {
 public:
  struct Options {
    std::string driver;     // the classes' provisioner, e.g. "nodevol.io"
    std::string ns;         // namespace of the objects
    nlohmann::json owner;   // an ownerReference, or null
    std::chrono::milliseconds debounce{1000};
    std::chrono::milliseconds resync{60000};
    double writes_per_second = 10;
    // How long after Start (leading) an unheard node keeps its value.
    std::chrono::milliseconds unknown_grace{30000};
  };

  CapacityPublisher(kube::Api* api, const kube::Informer* classes, const kube::TypedInformer<KubeNode>* nodes,
                    const CapacityLedger* ledger, Options options);
  ~CapacityPublisher();  // Stop()s

  void Start();
  void Stop();
  // Figures, classes or nodes changed: publish within `debounce`.
  void Poke();

  // One pass, now: list the objects if needed, then create, update and
  // delete until they match. For tests and the loop.
  Status Sync();

  // The object name for class and node: "nodevol-" + 20 hex digits of
  // their SHA-256.
  static std::string ObjectName(const std::string& class_name, const std::string& node);

 private:
  struct Known {
    std::string uid, class_name, topology;  // topology: the hostname label value
    uint64_t capacity = 0;
  };
  struct Want {
    std::string class_name, node, hostname;
    uint64_t capacity = 0;
    // No figures from the node yet (a new leader still dialling, within
    // unknown_grace): an existing object keeps its value instead of
    // dropping to 0.
    bool unknown = false;
  };
  std::map<std::string, Want> Desired() const;
  Status List();
  Status Write(const std::string& verb, const std::string& name, const Want* want);
  bool Pace();  // false when stopping
  void Loop();

  kube::Api* api_;
  const kube::Informer* classes_;
  const kube::TypedInformer<KubeNode>* nodes_;
  const CapacityLedger* ledger_;
  Options options_;
  std::string collection_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool poked_ = false, stopping_ = false;
  std::thread thread_;

  std::mutex sync_mu_;  // one Sync at a time; guards known_
  std::map<std::string, Known> known_;
  bool listed_ = false;
  std::chrono::steady_clock::time_point listed_at_;
  std::chrono::steady_clock::time_point last_write_;
  // Construction, then Start: when this replica began to lead (unknown_grace).
  std::atomic<std::chrono::steady_clock::time_point> started_{std::chrono::steady_clock::now()};
};

// The ownerReference of the Deployment running pod `pod` in `ns` (pod ->
// ReplicaSet -> Deployment, each the controller owner of the last), or of
// the deepest controller found. NOT_FOUND when the pod has no controller.
Status FindDeploymentOwner(kube::Api* api, const std::string& ns, const std::string& pod, nlohmann::json* ref);

}  // namespace nodevol::provisioner
