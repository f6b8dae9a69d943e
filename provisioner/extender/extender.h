// Extender: kube-scheduler's filter and prioritize, answered from the
// capacity ledger (docs/scheduling.md, layer 3). Transport-free: the HTTP
// translation is extender/http.h.
//
// A pod's need is the sum, per pool, of its claims that are unbound and of
// a WaitForFirstConsumer class we serve (CSIStorageCapacity checks one
// claim at a time; two 80 MiB claims on a node with 100 MiB pass there and
// fail here). A pod with no such claim passes everywhere, untouched.
//
// Filter keeps the nodes with room for the whole need; a claim made from a
// snapshot or a volume rules out every node but the one holding it
// (unresolvable: local data is nowhere else); a node without the
// pool (or without nodevold) is unresolvable, one short of room or whose
// nodevold is unreachable merely failed, each with a reason a person can
// act on. The best of the kept nodes by the placement policy is promised
// the pod's claims (kScheduling, `hold`), so the next pod of a burst sees
// those bytes as taken; when the scheduler then writes selected-node, the
// claim's promise moves to the node it chose (controller/pod_claims.h).
// Prioritize scores the node holding the pod's promise 10 (the best by
// policy when it has none, or no longer fits) and the other kept nodes
// 1-kOtherMaxScore by the same policy.
//
// Rooms are read with the pod's own claims' promises left out, so a pod
// filtered twice (a retry) is not counted against itself. A pod naming a
// claim the cache does not have yet gets an error, not a verdict.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "capacity/ledger.h"
#include "extender/args.h"
#include "placement/placement.h"

namespace nodevol::provisioner {

// One claim of the pod that still needs a volume.
struct PendingClaim {
  std::string uid, name;
  std::string pool, backend;  // backend "" = any kind
  uint64_t bytes = 0;
  // Made from a snapshot or a volume (a restore, a clone): only on the
  // node holding it; "" = anywhere. `source` says what it is, for reasons.
  std::string node = {}, source = {};
};

// A pod's claims as the provisioner's cache has them.
struct PodClaims {
  std::vector<PendingClaim> pending;  // those that still need a volume from us
  // Names the cache does not hold. kube-scheduler calls the extender only
  // once its own cache has every claim of the pod, so these are claims our
  // watch has not delivered yet: judged without them, the pod would pass
  // everywhere unpromised and could land where its bytes do not fit.
  std::vector<std::string> unknown;
};

// The pod's claims among `names` in namespace `ns`.
using ClaimFinder = std::function<PodClaims(const std::string& ns, const std::vector<std::string>& names)>;

struct FilterAnswer {
  std::vector<std::string> nodes;                    // passed
  std::map<std::string, std::string> failed;         // node -> why (resolvable)
  std::map<std::string, std::string> unresolvable;   // node -> why
  std::string promised;                              // the node promised the pod's bytes ("" none)
  // Not empty: the pod cannot be judged now (a claim not in the cache);
  // kube-scheduler fails this attempt and retries the pod after a backoff.
  std::string error;
};

struct NodeScore {
  std::string node;
  int score = 0;  // 0..kMaxScore
};

inline constexpr int kMaxScore = 10;
inline constexpr int kOtherMaxScore = 5;  // the best of the nodes not promised

class Extender {
 public:
  Extender(CapacityLedger* ledger, ClaimFinder finder, PlacementPolicy policy,
           std::chrono::milliseconds hold = std::chrono::seconds(30));

  FilterAnswer Filter(const ExtenderArgs& args);
  std::vector<NodeScore> Prioritize(const ExtenderArgs& args);

 private:
  // The node all of claims' promises are on ("" none, or several).
  std::string PromisedNode(const std::vector<PendingClaim>& claims) const;

  CapacityLedger* ledger_;
  ClaimFinder finder_;
  PlacementPolicy policy_;
  std::chrono::milliseconds hold_;
};

}  // namespace nodevol::provisioner
