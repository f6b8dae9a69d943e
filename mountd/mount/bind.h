// Bind mounts of volume directories into pod volume directories.
//
// Both paths must already be validated and resolved (mount/target.h): the
// calls refuse to follow a symlink in the last component, and read-only or
// flag changes are applied to the new mount only after checking that the
// path now shows the source's inode — never to the parent filesystem.
#pragma once

#include <sys/stat.h>

#include <string>
#include <vector>

#include "base/status.h"
#include "mount/mount_table.h"

namespace nodevol {

// What is mounted at a path, as far as nodevold cares.
enum class MountState {
  kNotMounted,     // not a mount point
  kMountedSource,  // a mount point showing the expected source directory
  kMountedOther,   // a mount point showing something else
};

// statx of `path` asking only for its type and inode (plus the device and
// mount-root attribute every statx returns), with AT_STATX_DONT_SYNC: an
// NFS client answers that from its cache, so it cannot hang on a dead
// server the way stat(2), lstat(2) and statvfs(2) of an NFS path do.
// Every check of publication sources and targets goes through it.
Status StatCached(const std::string& path, bool follow, struct statx* out);

// Checks `target` against `source` (by device and inode) without asking
// the filesystem for fresh attributes (StatCached); *read_only tells
// whether the target mount is read-only, from `table` when given (a
// snapshot the caller knows to be current for target), else from a fresh
// read of the mount table.
Status InspectMount(const std::string& source, const std::string& target, MountState* state,
                    bool* read_only = nullptr, const MountTable* table = nullptr);

// Parses bind mount options (nosuid, nodev, noexec, noatime, nodiratime,
// relatime, strictatime) into MS_* flags; INVALID_ARGUMENT names any other.
Status ParseBindOptions(const std::vector<std::string>& options, unsigned long* flags);

// The per-mount flags (MS_NOSUID, MS_NODEV, MS_NOEXEC) of the mount
// `source` lies on, which a bind of it starts with (the lvm backend stages
// volumes nosuid,nodev). A bind remount replaces every per-mount flag, so
// they are passed along explicitly. statvfs(2) tells them in one call, but
// on NFS it asks the server: with `remote` the mount table is read instead
// (which costs a parse of every mount on the node; `table`, when given,
// is a current snapshot of it).
unsigned long InheritedBindFlags(const std::string& source, bool remote, const MountTable* table = nullptr);

// Whether a mount's options (the mount table's, e.g. "rw,nosuid,nodev,
// relatime,...") already show read_only and the flags a remount sets: the
// read-only state and nosuid, nodev and noexec exactly, and the atime
// flags that are set.
bool ShowsFlags(const std::string& options, bool read_only, unsigned long flags);

// Bind-mounts source onto target, then applies MS_RDONLY and flags.
// On failure nothing stays mounted, unless the error says the cleanup
// unmount failed too (the caller must then unmount, see Publish's undo).
Status BindMount(const std::string& source, const std::string& target, bool read_only,
                 unsigned long flags);

// Sets exactly MS_RDONLY (when read_only) and flags on the bind mount at
// target, after checking target shows source. Used by BindMount and by
// reconcile to finish a bind whose flags were not applied yet.
Status Remount(const std::string& source, const std::string& target, bool read_only, unsigned long flags);

// FAILED_PRECONDITION naming the mount point when any mount in the table
// shows `dir` itself (by device and inode, cached attributes): a bind of a
// volume's directory anywhere, not only below it. A missing dir is OK.
Status CheckNotBound(const std::string& dir);

// Unmounts the top mount at target (never following a symlink). A target
// that is not a mount point is success.
Status Unmount(const std::string& target);

}  // namespace nodevol
