// CapacityLedger: the provisioner's one answer to "how many bytes can a new
// volume get in pool P on node N". Placement, the CSIStorageCapacity objects
// and the scheduler extender read it and nothing else (docs/scheduling.md).
//
// room = base - promised, where
//  - base is the free bytes nodevold last reported; for a pool that records
//    sizes without enforcing them (a dir pool without quotas), at most its
//    size minus the sizes of its volumes, because an empty volume takes no
//    space and free bytes alone would let a node be promised more than it
//    has. NFS pools are the exception: an export is shared by every node
//    and by clients outside the cluster, sizes there are advisory, and the
//    base is the free space the server reports.
//  - promised is the sum of the promises on that node and pool; for storage
//    several nodes share (PoolSeen::shared_by: an NFS export, whose whole
//    free space every node serving it reports), of the promises on any
//    of those nodes' pools, so N nodes never promise the export N times.
//    A promise that is not a create and is larger than the pool's base
//    is not counted: that claim cannot be made there, whatever else
//    waits, and is rescheduled; counted, it would starve every other.
//
// A promise belongs to a key (a claim's uid): a later promise of the same
// key replaces the earlier one, so a claim the extender let through, that
// the scheduler then selected a node for and whose volume is then being
// created counts once, wherever its latest promise is. Every promise ends:
// a create's when it fails, or once it succeeded and the node's figures
// reports the capacity sample nodevold said includes the volume (or, from
// an older nodevold, once its figures change after that; counting both
// would count the volume twice), or `linger` after it succeeded at most;
// the others at the time given or
// when released (the claim bound, its selected node removed, the claim
// gone). A create's promise is not replaced or released by the weaker
// kinds while it runs, nor for kMadeFor after it succeeded unless the
// key is released: the claim then waits for the PV controller to bind it
// (seconds in a burst), and a promise of its selected node made then
// would count a volume the figures already hold.
//
// Thread-safe. on_change runs after a promise is added, moved or dropped
// (not when one merely expires), outside the ledger's lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "placement/placement.h"

namespace nodevol::provisioner {

class CapacityLedger {
 public:
  using Clock = std::chrono::steady_clock;
  using Source = std::function<std::vector<PoolSeen>()>;
  // kube-scheduler's bind timeout: a claim whose volume is made is bound
  // by then, or given up.
  static constexpr std::chrono::minutes kMadeFor{10};

  enum class Kind {
    kScheduling,  // the extender let the claim's pod through to this node
    kSelected,    // the scheduler wrote selected-node; not provisioned yet
    kCreating,    // CreateVolume sent (or just done, lingering)
  };

  CapacityLedger(Source source, std::chrono::milliseconds linger = std::chrono::seconds(10));

  // Every node's pools, with what is promised there. Promises of the keys
  // in `except` are not counted (a claim deciding for itself and its pod's
  // other claims must not count their own promises against them).
  std::vector<PoolRoom> Rooms(const std::set<std::string>& except = {}, Clock::time_point now = Clock::now()) const;

  // Promises `bytes` on node/pool to `key` until `until` (kCreating: until
  // Settle). False, and nothing changes, when the key holds a create
  // promise and `kind` is weaker.
  bool Promise(const std::string& key, const std::string& node, const std::string& pool, uint64_t bytes, Kind kind,
               Clock::time_point until = Clock::time_point::max());
  // The create of `key` ended: ok keeps its bytes counted until the node
  // reports capacity sample `included_from` (CreateVolumeResponse's
  // capacity_sample: the first whose figures have the volume) or, when
  // that is 0 (an older nodevold), until its figures change after now;
  // `linger` more at most. !ok drops them now.
  void Settle(const std::string& key, bool ok, Clock::time_point now = Clock::now(), uint64_t included_from = 0);
  // Drops key's promise unless it is a create (running or lingering).
  void Release(const std::string& key);
  // Where key's promise is (false when it has none, or it expired).
  bool Find(const std::string& key, std::string* node, std::string* pool, Kind* kind,
            Clock::time_point now = Clock::now()) const;

  // When the earliest promise still running ends by itself
  // (time_point::max(): none will): rooms grow then without an on_change.
  Clock::time_point NextExpiry() const;

  // Held while a placement decides and promises, so two claims racing for
  // a node's last bytes see each other.
  std::mutex& decide_mu() { return decide_mu_; }
  void SetOnChange(std::function<void()> on_change);

 private:
  struct Entry {
    std::string node, pool;
    uint64_t bytes = 0;
    Kind kind = Kind::kScheduling;
    bool settled = false;  // kCreating: the create ended well; lingering
    Clock::time_point settled_at;
    uint64_t included_from = 0;  // the node's first sample with the volume (0: unknown)
    Clock::time_point until;  // counted until then
  };
  void Changed();
  // Drops promises and made marks that ended, at most once a second: a
  // burst holds thousands of them, and every placement and every Rooms
  // would otherwise walk them all (issue 19: 6.4 ms per decision at
  // 10,000 claims).
  void SweepLocked(Clock::time_point now);

  Source source_;
  std::chrono::milliseconds linger_;
  mutable std::mutex mu_;
  std::mutex decide_mu_;
  // Promises counted (or, ended, not yet swept). Few: those of claims
  // being scheduled or created, and of creates lingering until the
  // node's figures have their volume.
  std::map<std::string, Entry> entries_;
  // Keys whose create succeeded: weaker kinds are refused until then
  // (kMadeFor), long after the bytes stopped counting. Many in a burst,
  // so kept out of entries_, which Rooms walks.
  std::map<std::string, Clock::time_point> made_;
  Clock::time_point swept_;
  std::function<void()> on_change_;
};

// The base room of a pool as the ledger counts it (see above).
uint64_t BaseRoom(const PoolSeen& pool);

}  // namespace nodevol::provisioner
