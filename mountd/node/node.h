// Node: the domain of nodevold — volumes in pools and their publications
// into pod volume directories. Transport-free: the gRPC service and tests
// call it directly.
//
// Guarantees:
// - Every operation is idempotent (by volume name, by target path).
// - Operations on one volume or one target are serialized; different ones
//   run in parallel.
// - Durable intent: a record is written before the action (create, mount)
//   and removed only after the undoing action (delete, unmount), so after a
//   kill -9 at any instant Start() finds every volume and every mount it
//   made, finishes or rolls back half-done steps, and never deletes data a
//   volume record still owns.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend/backend.h"
#include "mount/target.h"
#include "node/lock_table.h"
#include "node/publications.h"
#include "node/snapshot.h"
#include "node/volume.h"
#include "state/store.h"

namespace nodevol {

class MountTable;

struct VolumeView {
  VolumeRecord record;
  std::vector<std::string> published_at;
};

struct PoolView {
  std::string name;
  std::string backend;
  std::vector<std::string> fs_types;
  bool size_enforced = false;
  Params attributes;
  bool snapshots = false;  // takes snapshots and makes volumes from them
};

struct PoolCapacityView {
  std::string pool;
  std::string backend;
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;
  uint64_t allocated_bytes = 0;
  uint32_t volume_count = 0;
  uint32_t snapshot_count = 0;
  // Thin pools: real use, for metrics. Not part of equality: capacity
  // watchers care about bytes, and these move with every write.
  std::optional<double> data_percent, metadata_percent;
  bool operator==(const PoolCapacityView& o) const {
    return pool == o.pool && backend == o.backend && total_bytes == o.total_bytes && free_bytes == o.free_bytes &&
           allocated_bytes == o.allocated_bytes && volume_count == o.volume_count &&
           snapshot_count == o.snapshot_count;
  }
};

struct InlineSpec {
  std::string pool;
  uint64_t size_bytes = 0;
  std::string fs_type;
  Params parameters;
};

struct PublishArgs {
  std::string volume;                 // or:
  std::optional<InlineSpec> inline_spec;
  std::string target;
  bool read_only = false;
  std::vector<std::string> mount_options;
  std::optional<uint32_t> fs_group;
  // A raw block volume's device, bound onto a file at kubelet's block
  // publish path (SetKubeletRoot), not a directory into a pod.
  bool block = false;
  PodIdentity pod;
  // The caller is kubelet (the CSI door), which must say which pod: a
  // claim's volume is refused without a pod namespace to check it against
  // (a CSIDriver without podInfoOnMount). Without it (nodevolctl on the
  // root-only socket) a publish without a pod is an operator's.
  bool pod_required = false;
  // The pool of a volume this node may not know (the PV's flex option
  // `pool`): an NFS volume another node made is looked for on that pool's
  // export, or on every pool's when empty (node/shared.cc).
  std::string pool;
  // When the caller stops waiting (its gRPC deadline): a Publish past it
  // undoes itself rather than leave a mount nobody will tear down.
  std::chrono::system_clock::time_point deadline = std::chrono::system_clock::time_point::max();
};

// Whose publication an Unpublish removes: any (FlexVolume's unmount and
// the Node API name only the target; both fields empty), or volume
// `volume`'s, or, when inline_volume, also the pod's inline volume at the
// target (CSI names that by kubelet's own id, which a PV's handle may
// look like too). One of another volume is left alone:
// FAILED_PRECONDITION, or NOT_FOUND when `volume` names none.
struct UnpublishOf {
  std::string volume;
  bool inline_volume = false;
};

struct VolumeStats {
  std::string volume;
  uint64_t total_bytes = 0, used_bytes = 0, available_bytes = 0;
  uint64_t total_inodes = 0, used_inodes = 0, free_inodes = 0;
};

class Node {
 public:
  // pods_root is resolved by the caller (mount/target.h ResolveConfiguredDir).
  Node(std::string pods_root, Store* store, std::map<std::string, std::unique_ptr<Backend>> pools);
  // Stops the background re-staging (node/restage.cc), waiting at most for
  // the stage in progress.
  ~Node();

  // Which pools pods may ask for inline volumes (node/access.cc); a pool
  // not named refuses them. Call before Start.
  void SetInlinePolicies(std::map<std::string, InlinePolicy> policies);
  // kubelet's root (resolved): raw block volumes are published below its
  // plugins/kubernetes.io/csi/volumeDevices/publish. Unset: none are.
  // Call before Start.
  void SetKubeletRoot(const std::string& kubelet_root);

  // Loads the state and reconciles it with the mount table (see reconcile.cc).
  // Binds to re-create on a backend whose staging may wait for a server
  // (NFS) are left to a background thread, so a dead server never holds
  // up the start of the whole node.
  Status Start();

  std::vector<PoolView> Pools() const;
  std::vector<std::string> Drift() const;
  Status GetCapacity(const std::string& pool, std::vector<PoolCapacityView>* out);

  Status CreateVolume(const VolumeSpec& spec, VolumeView* out);
  // shared_pool: a volume this node does not know is looked for in that
  // pool's shared storage (an NFS export), so any node serving an NFS pool
  // can act on its volumes; empty = this node's records only.
  Status DeleteVolume(const std::string& name, bool* existed, const std::string& shared_pool = "");
  Status ExpandVolume(const std::string& name, uint64_t size_bytes, VolumeView* out,
                      const std::string& shared_pool = "");
  Status GetVolume(const std::string& name, VolumeView* out, const std::string& shared_pool = "");
  // Volumes in name order (of `pool`, or all when empty): those named
  // after `after`, at most `max` of them (0: no limit); *more (optional)
  // tells whether any are left after the last one given.
  Status ListVolumes(const std::string& pool, std::vector<VolumeView>* out, const std::string& after = "",
                     size_t max = 0, bool* more = nullptr);

  // Snapshots (node/snapshots.cc): `name` of volume `source`, kept by
  // the volume's pool. Idempotent by name: the same name and source again
  // gives the snapshot; another source is ALREADY_EXISTS. A volume is
  // made from one with VolumeSpec::from_snapshot (a restore), or from
  // another volume with from_volume (a clone), in the same pool.
  Status CreateSnapshot(const std::string& name, const std::string& source, SnapshotRecord* out);
  Status DeleteSnapshot(const std::string& name, bool* existed);
  Status GetSnapshot(const std::string& name, SnapshotRecord* out);
  // Every snapshot, or those of volume `source`.
  Status ListSnapshots(const std::string& source, std::vector<SnapshotRecord>* out);

  // *volume gets the volume's name (generated for inline volumes), *target
  // the resolved target.
  Status Publish(const PublishArgs& args, std::string* volume, std::string* target);
  Status Unpublish(const std::string& target, bool* was_published, const UnpublishOf& of = {});
  Status GetVolumeStats(const std::string& target, VolumeStats* out);

  // Takes the state lock once: a deadlocked Node stops the watchdog pings.
  bool Healthy() const {
    std::lock_guard<std::mutex> l(mu_);
    return true;
  }

  // Bumped after every change of volumes (capacity watchers poll it).
  uint64_t generation() const { return generation_.load(); }

 private:
  Backend* FindPool(const std::string& pool) const;
  Status CheckSpec(const VolumeSpec& spec) const;
  // node/access.cc: whether `pod` may have volume `rec` published, and the
  // spec of an inline volume named `name` if its pool allows it.
  Status CheckPodMayUse(const VolumeRecord& rec, const PodIdentity& pod, bool pod_required) const;
  Status InlineVolumeSpec(const InlineSpec& in, const std::string& name, VolumeSpec* out) const;
  // node/snapshots.cc: the source a spec names (from_snapshot or
  // from_volume), checked against the spec; expects mu_ held.
  Status CheckSourceLocked(const VolumeSpec& spec, SnapshotRecord* snap, VolumeRecord* vol) const;
  // Whether a volume being made from `snapshot` / `volume` is in flight
  // (mu_ held): the source may not go meanwhile.
  std::string MadeFromLocked(const std::string& snapshot, const std::string& volume) const;
  Status DeleteSnapshotLocked(const std::string& name, bool* existed);
  void ReconcileSnapshots(std::vector<SnapshotRecord> snaps);
  // These expect the volume's lock held.
  Status CreateLocked(const VolumeSpec& spec, bool ephemeral, VolumeView* out);
  Status DeleteLocked(const std::string& name, bool* existed, const std::string& shared_pool = "");
  // node/shared.cc: a volume another node made, from the shared storage of
  // `pool` (every pool when empty); drops the copy kept for publishing.
  Status FindShared(const std::string& name, const std::string& pool, VolumeRecord* out) const;
  void DropSharedCopy(const std::string& name);
  Status UnpublishLocked(const PublicationRecord& pub);
  bool LookupVolume(const std::string& name, VolumeRecord* out) const;
  bool LookupPublication(const std::string& target, PublicationRecord* out) const;
  std::vector<std::string> PublishedAt(const std::string& volume) const;
  bool ShowsKnownVolume(const struct statx& st, const std::vector<std::string>& only = {}) const;
  void SaveVolumeInMemory(const VolumeRecord& v);
  void AddDrift(std::string line);
  void Reconcile();
  // `table`: the mount table read once before the first publication
  // (each changes only its own target's mount), or nullptr.
  void ReconcilePublication(PublicationRecord pub, const MountTable* table);
  Status Rebind(PublicationRecord* pub, unsigned long flags);
  void RestageLoop();
  void RollBack(const PublicationRecord& pub, const std::string& why);
  void AdoptUnrecorded(std::vector<VolumeRecord>* vols);

  const std::string pods_root_;
  std::string block_root_;  // set before Start, then read-only
  // Resolves a target of either kind: a raw block one when it lies below
  // block_root_ (or `block`), a pod volume directory otherwise.
  Status Resolve(const std::string& path, bool block, Target* out, bool allow_missing_parent = false) const;
  Store* const store_;
  const std::map<std::string, std::unique_ptr<Backend>> pools_;
  std::map<std::string, InlinePolicy> inline_policies_;  // set before Start, then read-only
  LockTable locks_;
  std::atomic<uint64_t> generation_{0};

  mutable std::mutex mu_;  // guards the maps and drift_; never held across I/O
  // volumes_ and snapshots_ change only through these (mu_ held), which
  // keep usage_ with them: a capacity sample then costs a lookup per pool,
  // not a walk of every record (bench/scale_bench: 2 ms at 10,000).
  void PutVolumeLocked(const VolumeRecord& v);
  void EraseVolumeLocked(const std::string& name);
  void PutSnapshotLocked(const SnapshotRecord& s);
  void EraseSnapshotLocked(const std::string& name);
  struct PoolUsage {
    uint64_t allocated_bytes = 0;
    uint64_t volumes = 0;
    uint64_t snapshots = 0;
  };
  std::map<std::string, PoolUsage> usage_;  // by pool name, of the records in volumes_ and snapshots_
  std::map<std::string, VolumeRecord> volumes_;
  Publications publications_;
  std::map<std::string, SnapshotRecord> snapshots_;
  std::vector<std::string> drift_;

  // node/restage.cc: targets whose bind waits for a server, and the thread
  // that re-creates them after the start.
  std::vector<std::string> restage_;  // filled by Start, then the thread's
  std::thread restager_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
};

}  // namespace nodevol
