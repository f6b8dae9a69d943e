// Store: the durable record of volumes and publications in the state dir.
//
//   <state>/lock                       flock'ed by the running nodevold
//   <state>/volumes/<name>.json        one VolumeRecord each
//   <state>/publications/<sha256(target)>.json[.publishing|.unpublishing]
//                                      one PublicationRecord each
//   <state>/snapshots/<name>.json      one SnapshotRecord each
//
// Every Put/Remove is atomic and complete when it returns (see
// atomic_file.h), so the node layer can write a record *before* acting
// (create, mount) and remove it only *after* (delete, unmount): a kill -9
// then leaves a record describing the unfinished step, never an action
// without a record. The Store keeps no index; the node layer holds the
// in-memory view.
//
// Durability: volume and snapshot records describe data on disk and are fsync'ed (file
// and directory) before a call returns, so they survive a power loss.
// Publication records describe mounts, which a power loss erases anyway;
// they are replaced atomically but fsync'ed only when the caller asks (the
// first record of an inline volume's publication), which keeps seven fsyncs
// off every pod start and stop. After a power loss a publication record may
// be stale or missing; reconcile never reads an absent record as leave to
// delete anything (node/reconcile.cc).
//
// Publication records say their state with their file name, so each step
// of a publication after the first is one rename (MovePublication): the
// record is written once as "<d>.json.publishing" before mounting, renamed
// to "<d>.json" once mounted and to "<d>.json.unpublishing" before
// unmounting, and unlinked after. Its content is the record as published.
// Where a crash left two names, the later state wins (unpublishing, then
// published, then publishing); a plain "<d>.json" of an older nodevold
// keeps the state written inside it.
//
// Teardown intent without free space: writing "deleting" or "unpublishing"
// needs a new file; when that fails (a full state filesystem) the record is
// renamed to "<file>.deleting" / "<file>.unpublishing" instead, which Load
// reads as that state. Removing a record removes the plain file first.
//
// A hung disk: every Put/Remove counts itself in writes() while it runs,
// so a write that never returns is seen (write_watch.h).
//
// Formats: Load refuses (FAILED_PRECONDITION, nothing changed) a record of a
// newer format (records_json.h) and any file it cannot read (EIO, EMFILE);
// only a file that fails to parse in a format this nodevold writes is moved
// aside as "<file>.corrupt".
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "node/snapshot.h"
#include "node/volume.h"
#include "state/write_watch.h"

namespace nodevol {

class Store {
 public:
  explicit Store(std::string dir);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Creates the layout (mode 0700), takes the lock (FAILED_PRECONDITION when
  // another nodevold holds it), drops temp files left by a crash.
  Status Open();

  // Reads every record (see Formats above). A file that cannot be parsed is
  // renamed to "<file>.corrupt" (kept for the operator) and described in
  // *problems.
  Status Load(std::vector<VolumeRecord>* volumes, std::vector<PublicationRecord>* publications,
              std::vector<std::string>* problems);

  // Snapshot records, read as Load reads volumes ("deleting" tombstones
  // and all).
  Status LoadSnapshots(std::vector<SnapshotRecord>* snapshots, std::vector<std::string>* problems);

  Status PutVolume(const VolumeRecord& v);
  Status RemoveVolume(const std::string& name);
  // Writes p in p.state (the first record of a publication, or a
  // rewrite), then drops the record's files of other states.
  Status PutPublication(const PublicationRecord& p, bool durable = false);
  // Records p, on disk in state `from`, as now in p.state: one rename, no
  // new file (so it works on a full disk too). Where the record is not on
  // disk as `from` (written by an older nodevold), PutPublication(p).
  Status MovePublication(const PublicationRecord& p, PublicationState from, bool durable = false);
  Status RemovePublication(const std::string& target);
  Status PutSnapshot(const SnapshotRecord& s);
  Status RemoveSnapshot(const std::string& name);

  const std::string& dir() const { return dir_; }

  // The writes running now (a hung state disk shows as an old one).
  const WriteWatch& writes() const { return writes_; }

 private:
  std::string dir_;
  int lock_fd_ = -1;
  WriteWatch writes_;
};

}  // namespace nodevol
