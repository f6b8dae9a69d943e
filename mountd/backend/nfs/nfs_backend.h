// NfsBackend: volumes on NFS exports. nodevold owns every NFS mount on the
// node; kubelet never mounts NFS itself.
//
// Two kinds of volume:
// - subdirectory volumes (the default): CreateVolume makes a directory under
//   the pool's export, named by a path pattern (path_pattern.h) rendered from
//   the claim's namespace, name, PV name, annotations and labels; DeleteVolume
//   deletes, retains or archives it (parameter onDelete, pool default).
// - export volumes: parameter `share` (and optionally `server`) names a whole
//   existing export; nothing is created or deleted on the server.
// Server, export, mount options, directory and onDelete are fixed in the
// volume's record at creation (as a PV's are): changing the pool's options
// later changes new volumes only.
//
// Staging: each (server, export, mount options) is mounted once per node at
// <state dir>/nfs/<hash of the three>, shared by every volume and every
// NFS pool on it. Stage binds the volume's directory inside that mount to
// <state dir>/nfs/volumes/<volume> and returns that path; pods get bind
// mounts of it. The per-volume bind is the volume's reference on the
// staging mount: made under the staging mount's lock (which Replace and
// every unmount take) before Stage returns, so neither an Unstage of
// another volume nor the replacement of a stale mount can unmount the
// export between a Stage and the pod's bind (binding a just-unmounted
// staging dir would put the pod's data on the node's disk); the bind also
// refuses a descriptor that is not on NFS. Paths under the state dir are
// canonical (realpath at Make), as the mount table shows them. A staging mount is unmounted when the
// last mount of its device other than itself goes; who still uses it is
// read from the mount table, never counted in memory or on disk, so a crash
// cannot get the count wrong, and a restarted nodevold finds and reuses the
// staging mount by its path. (With the kernel's default sharecache, a
// mount of the same export made by someone else with the same options
// shares the device and counts as a user too: conservative, the staging
// mount then stays. A mount whose options differ only in ones the kernel
// does not compare, like timeo or nconnect, would share the superblock as
// well without its options: it is unmounted again and refused, naming
// nosharecache, which avoids both and makes the count exact.) Only nodevold's
// own in-flight Create/Delete/Stage are counted in memory, so they are not
// unmounted under.
//
// Dead or slow servers never stall the daemon: mount, statfs, directory work
// and unmount on a server run with the pool's deadline where a stuck call
// cannot hold a serving thread (nfs_client.h); a server that does not answer
// gives UNAVAILABLE or DEADLINE_EXCEEDED naming the server. Paths the node
// layer looks at (publication sources and targets) are mount roots, which
// it inspects with statx asking only for type and inode, which an NFS
// client answers from its cache (mount/bind.h); stat(2), lstat(2) and
// statvfs(2) of a dead hard-mounted server's bind hang (seen in the VM),
// and so does the last unmount of a superblock with dirty pages. A staging
// mount or per-volume bind whose root answers ESTALE is replaced at Stage;
// publications made before keep their stale handles until published again.
//
// Pool options (--pool=name=shared,backend=nfs,...): pool_options.h
//   server=HOST                 NFS server (name or address; required)
//   share=/PATH                 exported directory (required)
//   mount-options=OPT ...       space-separated, validated (mount_options.h)
//   path-pattern=PATTERN        default ${namespace}-${pvcName}-${pvName}
//   on-delete=delete|retain|archive   default delete
//   timeout=SECONDS             deadline of every server operation (default 30)
// Volume parameters: pathPattern (alias subDir), onDelete, archiveOnDelete
// ("false" = delete, "true" = archive; onDelete wins), mode, uid, gid
// (subdirectory volumes); share, server (export volumes); mountOptions
// (both: added to the pool's, same rules); the claim's identity as the
// provisioner passes it: nodevol.io/pvc-namespace, nodevol.io/pvc-name,
// nodevol.io/pv-name, nodevol.io/pvc-annotation.<key>,
// nodevol.io/pvc-label.<key>.
// Sizes are recorded, not enforced (NFS has no per-directory limit here);
// capacity is the export's statfs.
//
// Several nodes: every node serving the pool (the same export under the
// same pool name) can publish, expand and delete any of its volumes. The
// creating node writes the volume's record to the export as well
// (shared_records.h) after the volume's directory exists, rewrites it on
// expansion, and removes it after the directory (Delete); another node
// finds it there (FindShared) and the node layer keeps a copy while it
// publishes the volume (node/shared.cc). Only subdirectory volumes of the
// pool's export are shared so: inline volumes belong to one pod on one
// node, and an export volume stays with the node that made it (Shared).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "backend/backend.h"
#include "backend/nfs/pool_options.h"
#include "backend/volume_root.h"

namespace nodevol {

class NfsServer;

class NfsBackend : public Backend {
 public:
  // Parses the options and makes <state dir>/nfs; contacts no server.
  static Status Make(const std::string& pool, const Params& options, const std::string& state_dir,
                     std::unique_ptr<Backend>* out);

  std::string kind() const override { return "nfs"; }
  std::vector<std::string> fs_types() const override { return {""}; }
  bool size_enforced() const override { return false; }
  Params attributes() const override;

  // A directory named after the volume, whatever the pool's path-pattern
  // and on-delete say: a pod's inline volume never lands in a claim's
  // directory and never outlives the pod.
  Params InlineParameters() const override { return {{"pathPattern", "${pvName}"}, {"onDelete", "delete"}}; }
  Status Validate(const VolumeSpec& spec) const override;
  Status Create(VolumeRecord* record) override;
  Status Delete(const VolumeRecord& record) override;
  // Only the shared record changes (the size is recorded, not enforced).
  Status Expand(VolumeRecord* record, uint64_t new_size) override;
  Status Stage(const VolumeRecord& record, std::string* path) override;
  Status Unstage(const VolumeRecord& record) override;
  std::string StagedMount(const VolumeRecord& record) const override { return VolumeDir(record.spec.name); }
  bool StageMayWait() const override { return true; }
  Status Check(const VolumeRecord& record) override;
  Status GetCapacity(Capacity* out) override;
  Status Survey(const std::set<std::string>& known, std::vector<VolumeRecord>* unrecorded,
                std::vector<std::string>* drift) override;
  // The volume's record that the node which created it keeps on the
  // pool's export (shared_records.h), checked, for this node's use.
  Status FindShared(const std::string& volume, VolumeRecord* out) override;

  // What a volume is, from its spec (Validate, Create) or its record.
  struct Volume {
    bool whole_export = false;
    std::string server, share, options;  // options: canonical (mount_options.h)
    std::string subdir;                  // below the export; "" for export volumes
    std::string on_delete;               // delete, retain, archive
    VolumeRoot root;
    bool chown = false;                  // uid or gid given
  };

 private:
  struct Staging;
  NfsBackend(std::string pool, NfsPoolOptions options, std::string root);
  Status Resolve(const VolumeSpec& spec, Volume* out) const;
  Status FromRecord(const VolumeRecord& record, Volume* out) const;
  std::string StagingDir(const Volume& v) const;
  std::string VolumeDir(const std::string& volume) const { return root_ + "/volumes/" + volume; }
  // Mounts the volume's export at its staging dir unless it is, and holds
  // it (in memory) until Release. *dir gets the staging dir.
  Status Acquire(const Volume& v, std::string* dir);
  // Drops the hold; unmounts the staging mount when nothing uses it.
  Status Release(const Volume& v);
  // Unmounts a fresh staging mount whose options a shared superblock did
  // not apply, with FAILED_PRECONDITION saying how to fix it.
  Status CheckApplied(const Volume& v, const std::string& dir);
  Status ReleaseLocked(const Volume& v, Staging* s);
  // Unmounts the staging mount if nothing uses it, without a hold to drop.
  Status Release0(const Volume& v);
  // Unmounts and mounts again a staging mount whose root is stale.
  Status Replace(const Volume& v);
  // Removes the per-volume bind (if any).
  Status UnbindVolume(const Volume& v, const std::string& volume);
  // The pool's own export with the pool's options: where shared records
  // live (shared_records.h).
  Volume PoolExport() const;
  // Whether the volume has a shared record: a subdirectory volume that is
  // not inline. An export volume (share=) stays with the node that made
  // it: a record on the export naming another export would have other
  // nodes mount, as root, what any writer of the export chose.
  static bool Shared(const VolumeRecord& record);
  // Before a shared volume's first directory or record: OK unless the
  // export holds a record of the name made for another claim
  // (ALREADY_EXISTS) or one that cannot be used (FAILED_PRECONDITION).
  // The same claim's record (a retry, here or on another node) is OK.
  Status CheckNotAnothersVolume(const VolumeRecord& record, const Volume& v);
  // Runs fn on the server's worker with the pool's export mounted at dir.
  Status OnPoolExport(const std::string& what, std::function<Status(const std::string& dir)> fn);
  // Writes or removes a volume's shared record through the pool's
  // staging mount (mounting it for the call when it is not).
  Status PutShared(const VolumeRecord& record);
  Status RemoveShared(const std::string& volume);
  // A volume made before shared records existed gets its record at its
  // first Stage by this process: one read of the export per volume.
  // Failures are logged; the next Stage tries again.
  void EnsureShared(const VolumeRecord& record);
  std::chrono::milliseconds timeout() const { return options_.timeout; }

  const std::string pool_;
  const NfsPoolOptions options_;
  const std::string root_;  // <state dir>/nfs
  std::shared_ptr<NfsServer> server_;
  std::mutex shared_mu_;
  std::set<std::string> shared_checked_;  // volumes whose shared record is known to be there

  // One refresh at a time; a caller that finds one running gets the last
  // figures at once instead of waiting for the server with it. Before
  // the first figures there is nothing to give, so it waits for that read.
  std::timed_mutex refresh_mu_;
  std::mutex capacity_mu_;  // guards the five below
  Capacity capacity_;
  bool capacity_known_ = false;  // capacity_ was read at least once
  std::chrono::steady_clock::time_point capacity_time_{};
  std::string capacity_error_;
};

}  // namespace nodevol
