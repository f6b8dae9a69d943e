// DirBackend: each volume is a directory <pool path>/<volume name>.
//
// Snapshots are copies (dir_snapshot.cc): <pool path>/.snapshots/<name>,
// made under a ".making-" name and renamed when complete; a volume made
// from a snapshot or a volume is a copy made the same way. Names start
// with a letter or digit, so the dot-names never meet a volume's.
//
// Pool options: path=<dir> (must exist), quota=auto|off|required (project
// quotas, see project_quota.h). Volume parameters: mode (octal, default
// 0777 so pods of any uid can write, like hostPath provisioners), uid, gid.
// Without quota enforcement the size is recorded but not enforced, and the
// pool's free space is shared by all its volumes.
//
// A disk that stops answering: creates, expands and deletes are bounded
// by their progress, and the pool then takes nothing new until the stuck
// one finishes (disk_gate.h); snapshots and copies only check the gate.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <set>
#include <string>

#include "backend/backend.h"
#include "backend/dir/copy_space.h"
#include "backend/disk_gate.h"
#include "backend/volume_root.h"

namespace nodevol {

class DirBackend : public Backend {
 public:
  // Builds a pool from its options; INVALID_ARGUMENT names a bad option.
  // io_limit: how long a bounded operation may go without progress.
  static Status Make(const std::string& pool, const Params& options, std::unique_ptr<Backend>* out,
                     std::chrono::milliseconds io_limit = kDefaultIoLimit);
  static constexpr std::chrono::milliseconds kDefaultIoLimit{30000};

  std::string kind() const override { return "dir"; }
  std::vector<std::string> fs_types() const override { return {""}; }
  bool size_enforced() const override { return quota_; }
  Params attributes() const override;

  Status Validate(const VolumeSpec& spec) const override;
  Status Create(VolumeRecord* record) override;
  Status Delete(const VolumeRecord& record) override;
  Status Expand(VolumeRecord* record, uint64_t new_size) override;
  Status Stage(const VolumeRecord& record, std::string* path) override;
  Status Unstage(const VolumeRecord& record) override { return Status::Ok(); }
  Status Check(const VolumeRecord& record) override;
  Status GetCapacity(Capacity* out) override;
  DiskGate* disk_gate() override { return &gate_; }

  bool snapshot_capable() const override { return true; }
  Status CreateSnapshot(const VolumeRecord& source, SnapshotRecord* snapshot, bool resumed) override;
  Status DeleteSnapshot(const SnapshotRecord& snapshot) override;
  Status CreateFrom(VolumeRecord* record, const SnapshotRecord* snapshot, const VolumeRecord* volume,
                    bool resumed) override;
  Status CheckSnapshot(const SnapshotRecord& snapshot) override;

 private:
  static constexpr char kMakingPrefix[] = ".making-";
  static constexpr char kDeletingPrefix[] = ".deleting-";
  // Set in a record whose directory a create found and did not make:
  // undoing that create must leave the directory alone.
  static constexpr char kFoundNotMade[] = "dir_found_not_made";

  // What the pool's bounded operations use: copied into their threads,
  // which may outlive the backend while a dead disk holds them.
  struct Where {
    std::string pool;
    std::string path;  // resolved
    dev_t dev;         // project ids are per filesystem
    bool quota;
    std::string VolumeDir(const std::string& name) const { return path + "/" + name; }
  };

  DirBackend(Where where, std::chrono::milliseconds io_limit);
  std::string VolumeDir(const std::string& name) const { return where_.VolumeDir(name); }
  std::string SnapshotsDir() const { return path_ + "/.snapshots"; }
  static Status MakeVolumeDir(const Where& w, const std::string& name, const VolumeRoot& root, uint64_t bytes,
                              Params* attributes, const Step& step);
  static Status RemoveVolumeDir(const Where& w, const std::string& name, const Step& step);
  // Gives dir a project id of its own (kept if it has one) limited to
  // bytes; records the id in attributes["project_id"].
  static Status ApplyQuota(const Where& w, const std::string& dir, uint64_t bytes, Params* attributes);
  Status ApplyQuota(const std::string& dir, uint64_t bytes, Params* attributes) {
    return ApplyQuota(where_, dir, bytes, attributes);
  }
  // Copies the tree at src into parent/<name>: into parent/.making-<name>
  // first (a leftover of an earlier try is removed), with a project quota
  // of limit bytes when the pool has quotas, synced, then renamed. Every
  // snapshot, restore and clone goes through it, and before the first byte
  // it measures what the copy will write (fs/tree_copy.h: hard links in
  // full) and refuses, RESOURCE_EXHAUSTED, a copy larger than limit (with
  // quotas) or than the pool's free space less what the copies under way
  // on its filesystem have reserved; it reserves that much until it ends,
  // and the copy may take no more than it measured (a pod writing
  // meanwhile makes it ABORTED, not larger). The copy itself runs without
  // CAP_SYS_RESOURCE (process/without_capability.h), so the project's hard
  // limit binds it on ext4 too.
  Status CopyInto(const std::string& src, const std::string& parent, const std::string& name, uint64_t limit,
                  Params* attributes);

  const Where where_;
  const std::string& pool_ = where_.pool;
  const std::string& path_ = where_.path;
  const bool quota_ = where_.quota;
  DiskGate gate_;
  // What the copies under way on this pool's filesystem may still write
  // (shared with the other pools on it).
  CopySpace& copies_ = CopySpace::ForFilesystem(where_.dev);
};

}  // namespace nodevol
