// Backend: how one pool stores volumes. LVM, NFS and directory pools each
// implement it in their own folder (backend/dir, backend/lvm, backend/nfs).
//
// The node layer (node/node.h) owns names, locking, state records and
// publication; a backend only manages storage. Contract for implementers:
// - Every call is idempotent: Create of an existing volume with the same spec
//   succeeds, Delete of a missing one succeeds, Unstage of an unstaged one
//   succeeds. The node layer retries any of them after a crash.
// - Calls for different volumes may run concurrently; the node layer never
//   runs two calls for the same volume at once.
// - Errors are Status values with a message an operator can act on.
// - A backend never deletes data except in Delete.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "node/snapshot.h"
#include "node/volume.h"

namespace nodevol {

class DiskGate;

struct Capacity {
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;
  // Thin pools only: how full the pool's data and metadata really are.
  std::optional<double> data_percent, metadata_percent;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Backend kind: "dir", "lvm", "nfs".
  virtual std::string kind() const = 0;
  // Filesystem types Create accepts ("" is always the pool default).
  virtual std::vector<std::string> fs_types() const = 0;
  // Whether volume sizes are enforced.
  virtual bool size_enforced() const = 0;
  // Facts for GetInfo (path, volume group, ...).
  virtual Params attributes() const = 0;

  // Parameters every inline ephemeral volume of this pool gets, so its
  // storage has a generated place of its own and goes with it (nfs: a
  // directory named after the volume, deleted). A pod author gives only
  // size, fsType and mode (node/access.cc).
  virtual Params InlineParameters() const { return {}; }
  // Whether it makes raw block volumes (VolumeSpec::block): Stage then
  // gives the device node, not a directory.
  virtual bool block_capable() const { return false; }
  // Checks backend-specific parameters of a spec before anything is written.
  virtual Status Validate(const VolumeSpec& spec) const = 0;
  // Creates the volume's storage; fills record->attributes.
  virtual Status Create(VolumeRecord* record) = 0;
  // Create, told whether the record was already `creating` before this
  // call (a retry after a crash or a failure). Only then may storage found
  // under the volume's name be this volume's unfinished work; otherwise it
  // is someone's data and must be refused, not reused (issue 27).
  virtual Status Create(VolumeRecord* record, bool resumed) { return Create(record); }
  // Removes the volume's storage and data.
  virtual Status Delete(const VolumeRecord& record) = 0;
  // Grows the volume to new_size (>= current); updates record->attributes.
  virtual Status Expand(VolumeRecord* record, uint64_t new_size) = 0;
  // Makes the volume's data reachable as a host directory and returns it in
  // *path (dir: the volume directory; lvm: the LV mounted under the state
  // dir; nfs: a subdirectory of a shared staging mount). Called before each
  // publication; the node layer calls Unstage after the last one goes.
  virtual Status Stage(const VolumeRecord& record, std::string* path) = 0;
  virtual Status Unstage(const VolumeRecord& record) = 0;
  // Where Stage mounts the volume when staging is a mount of its own (lvm:
  // the LV's mount; nfs: the volume's bind), else "". Reconcile unstages a
  // ready volume mounted there that no publication holds.
  virtual std::string StagedMount(const VolumeRecord& record) const { return ""; }
  // Whether Stage may wait for something outside the node (an NFS server):
  // the start then re-stages this pool's publications in the background.
  virtual bool StageMayWait() const { return false; }
  // The gate every piece of work on this pool's local disk goes through
  // (backend/disk_gate.h), the node layer's fsGroup walk included; nullptr
  // when there is none (NFS bounds its server's calls itself).
  virtual DiskGate* disk_gate() { return nullptr; }
  // Whether the volume's storage exists (for reconcile and drift reports).
  virtual Status Check(const VolumeRecord& record) = 0;
  // Pool capacity as the backend sees it.
  virtual Status GetCapacity(Capacity* out) = 0;

  // Snapshots and volumes made from them or from other volumes
  // (docs/snapshots.md). Same contract as volumes: idempotent, `resumed`
  // as for Create, nothing left behind by a failed CreateSnapshot once
  // DeleteSnapshot has undone it. A backend that cannot says why with
  // FAILED_PRECONDITION (the default).
  virtual bool snapshot_capable() const { return false; }
  virtual Status CreateSnapshot(const VolumeRecord& source, SnapshotRecord* snapshot, bool resumed) {
    return Status::FailedPrecondition("pool " + source.spec.pool + " (" + kind() + ") does not take snapshots" +
                                      SnapshotHelp());
  }
  virtual Status DeleteSnapshot(const SnapshotRecord& snapshot) { return Status::Ok(); }
  // Creates `record`'s storage holding the content of `snapshot` or of
  // `volume` (exactly one is set), grown to record->spec.size_bytes
  // (never less than the source's). Fills record->attributes like Create.
  virtual Status CreateFrom(VolumeRecord* record, const SnapshotRecord* snapshot, const VolumeRecord* volume,
                            bool resumed) {
    return Status::FailedPrecondition("pool " + record->spec.pool + " (" + kind() +
                                      ") makes no volume from a snapshot or another volume" + SnapshotHelp());
  }
  // Whether the snapshot's storage exists (reconcile, drift reports).
  virtual Status CheckSnapshot(const SnapshotRecord& snapshot) { return Status::Ok(); }

  // A volume this node has no record of, from storage the pool shares
  // with other nodes (nfs: the record the creating node keeps on the
  // export), as a ready record. NOT_FOUND when the pool has no such
  // volume (the default: storage of a node's own). The node layer keeps a
  // copy only while it publishes the volume (node/shared.cc).
  virtual Status FindShared(const std::string& volume, VolumeRecord* out) {
    return Status::NotFound("volume " + volume + " does not exist on this node");
  }

  // Pool option allow-suid-dev=yes (registry.cc): publications honour
  // setuid bits and device nodes. Off by default: every publication is
  // nosuid,nodev, so nothing a pod puts in a volume gains privilege.
  bool allow_suid_dev() const { return allow_suid_dev_; }
  void set_allow_suid_dev(bool allow) { allow_suid_dev_ = allow; }

  // First thing at start-up, before any record is acted on: undo what an
  // interrupted tool of an earlier nodevold left half-done and in the way
  // of everything else (lvm: a device-mapper device left suspended by a
  // killed lvextend, on which any I/O, a mount, waits forever). What it
  // did goes to *drift.
  virtual Status Recover(std::vector<std::string>* drift) { return Status::Ok(); }

  // At start-up: storage of this pool that no record among `known` (all
  // volume names of the node) explains goes to *unrecorded, as ready
  // records the node adopts (e.g. an LV whose record was lost); anything
  // else worth an operator's look goes to *drift. Changes nothing.
  virtual Status Survey(const std::set<std::string>& known, std::vector<VolumeRecord>* unrecorded,
                        std::vector<std::string>* drift) {
    return Status::Ok();
  }

 protected:
  static std::string SnapshotHelp() { return "; use a pool that does (docs/snapshots.md: lvm thin and dir pools)"; }

 private:
  bool allow_suid_dev_ = false;
};

}  // namespace nodevol
