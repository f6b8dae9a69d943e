// WalkTree: a depth-first, post-order walk of a directory tree by
// descriptors only, for root acting on trees their users (pods) may change
// while it runs.
//
// - Every directory is opened relative to its parent's descriptor with
//   O_NOFOLLOW|O_DIRECTORY, every entry looked at with fstatat relative to
//   its directory (AT_SYMLINK_NOFOLLOW): a symlink swapped in for a
//   directory is never entered, and nothing is ever resolved by path.
// - One directory is open at a time. Going back up opens ".." and checks
//   it is the directory (device, inode) the walk came down from; the walk
//   then resumes where it left that directory. Memory is 56 bytes per
//   level whatever the names (a pod may make a tree a million levels
//   deep): no PATH_MAX, no name, no descriptor per level, no recursion.
// - The walk stays on the root's mount: a directory or file on another
//   mount (a mount point inside the tree, a file bind-mounted into it) goes
//   to on_other_mount and is never entered or given to on_entry. (Before
//   Linux 5.8 statx has no mount id: only directories are checked.)
// A tree moved under the walk so that ".." is no longer where it came from
// ends it with ABORTED (nothing outside the root was touched; run again).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <functional>

#include "base/status.h"

namespace nodevol {

struct TreeWalkOps {
  // An entry that is not a directory: `name` in the open directory `dir`,
  // as fstatat(AT_SYMLINK_NOFOLLOW) saw it.
  std::function<Status(int dir, const char* name, const struct stat& st)> on_entry;
  // A directory (the root too, last) after all its entries, by an open
  // descriptor of it and its fstat.
  std::function<Status(int fd, const struct stat& st)> on_dir_done;
  // Back in `dir` from its subdirectory `name` (not called for the root).
  // `name` is null when that entry is no longer where the walk found it,
  // the same directory (renamed or removed meanwhile): act by name only on
  // a name given.
  std::function<Status(int dir, const char* name)> on_child_done;
  // Just entered subdirectory `name` (pre-order), open at `fd`, as fstat
  // saw it once open; before any of its entries. Not called for the root.
  std::function<Status(int fd, const char* name, const struct stat& st)> on_dir_enter;
  // An entry on another mount than the root; default: skip it.
  std::function<Status(int dir, const char* name)> on_other_mount;
  // Read a directory again from its start when entries were removed
  // during the pass (a delete: some filesystems shift offsets on removal).
  bool rescan_after_removal = false;
};

// Walks the tree whose root directory is open at root_fd (a descriptor the
// caller keeps). root_fd must be an O_RDONLY directory descriptor.
Status WalkTree(int root_fd, const TreeWalkOps& ops);

// The mount id of an open descriptor (statx STATX_MNT_ID).
Status MountIdOf(int fd, uint64_t* id);

}  // namespace nodevol
