// Directory work below a mounted export: what CreateVolume and
// DeleteVolume of subdirectory volumes do on the server. Every function
// here may wait for the server; call them only on the server's worker
// (NfsServer::Call).
//
// Paths below the export are resolved with openat2(RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV) from the mount's root: a symlink
// made on the server (whose target the client would resolve in the node's
// own tree) or another filesystem under the export stops the call instead
// of being followed.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "backend/volume_root.h"
#include "base/status.h"
#include "base/unique_fd.h"

namespace nodevol {

// openat2(2) of `path` below `dirfd` with the resolution described
// above (and O_NOFOLLOW, O_CLOEXEC); retried while a rename races it.
// Returns the descriptor, or -1 with errno set.
int OpenAt2(int dirfd, const std::string& path, uint64_t flags);

// The Status of an OpenAt2 that failed with `err`: a symlink, a file or
// another filesystem in the way is FAILED_PRECONDITION (the server's
// doing), anything else as errno says.
Status OpenError(const std::string& what, int err);

// Asks the server for the attributes of `dir` (a mount point or a
// directory below one) afresh: ESTALE and a dead server show here.
Status StatFresh(const std::string& dir);

// Opens `rel` ("" = the root itself) below the mount at `root` as an
// O_PATH directory descriptor. NOT_FOUND when it is missing.
Status OpenBelow(const std::string& root, const std::string& rel, UniqueFd* out);

// mkdir -p of `rel` below `root`: missing parents get 0755, the last
// segment gets root.mode, and root.uid/gid when chown is set (left out by
// default: an export with root_squash refuses chown to root). An existing
// directory is reused (a retried create, or the provisioner's behaviour).
Status MakeVolumeDir(const std::string& root, const std::string& rel, const VolumeRoot& vroot, bool chown);

// Binds the directory `rel` below the NFS mount at `root` ("" = its root)
// onto `target`, through a descriptor: refuses (FAILED_PRECONDITION, no
// mount made) when the directory it opened is not on NFS, i.e. `root` is
// not mounted at that instant (an unmount racing the bind would otherwise
// put the node's own empty directory into a pod).
Status BindBelow(const std::string& root, const std::string& rel, const std::string& target);

// Progress of one removal, kept by the caller between slices: the open
// tombstone, its directory stream (a slice reads on where the last one
// stopped) and counters. Memory is bounded whatever the tree's depth or
// width: two directory streams at most. Use it on one worker only.
struct RemoveCursor {
  RemoveCursor() = default;
  ~RemoveCursor();
  RemoveCursor(const RemoveCursor&) = delete;
  RemoveCursor& operator=(const RemoveCursor&) = delete;

  UniqueFd parent;          // the directory holding the tombstone
  void* dir = nullptr;      // DIR* of the tombstone, open at a pass's position
  uint64_t next_name = 0;   // for directories moved up into the tombstone
  bool pass_saw = false;    // this pass over the tombstone saw an entry
  bool pass_removed = false;
  int idle_passes = 0;      // passes in a row that saw entries but removed none
};

// Removes `rel` below `root` and everything in it, never following a
// symlink, until done (*done = true) or `until` passes (*done = false;
// call again, with the same cursor or a fresh one, to go on). First the
// directory is renamed to `tombstone` (".nodevol-deleting-<volume>") in
// its parent; from then on only the tombstone is touched, so a claim that
// re-creates `rel` meanwhile, or a rename on the server, never has its
// data removed. A tombstone left by an earlier call is what is removed
// (without looking at `rel` again). Iterative: a subdirectory that is not
// empty has its entries moved up into the tombstone, so depth costs
// neither stack nor memory. Missing is done. EACCES, ESTALE and every
// other error are returned.
Status RemoveVolumeDir(const std::string& root, const std::string& rel, const std::string& tombstone,
                       std::chrono::steady_clock::time_point until, RemoveCursor* cursor, bool* done);

// Renames the last segment of `rel` to "archived-<segment>" in the same
// directory, or "archived-<segment>-<UTC time>[-N]" when that exists;
// *archived_as gets the new relative path. Missing is success (""). A
// name that cannot be looked up (EACCES, ESTALE) is an error, not a taken
// name.
Status ArchiveVolumeDir(const std::string& root, const std::string& rel, std::string* archived_as);

}  // namespace nodevol
