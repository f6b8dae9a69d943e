// Opening a name in a directory someone else controls: a pod's volume, an
// NFS export, a kubelet path. Whoever controls the directory can put a
// device node, a FIFO or a symlink at the name, or swap one in between a
// check and an open; root opening it runs a driver's open (an idle
// /dev/watchdog opened and closed resets the node) or releases a writer
// blocked on a FIFO (issue 69, items 2 and 3). So a name is first opened
// with O_PATH | O_NOFOLLOW, which opens nothing, its type is checked on
// that descriptor, and only then is the same inode opened for reading or
// writing, through /proc/self/fd (not a second lookup of the name).
//
// Every caller that opens such a name goes through here: the dir pool's
// tree copy (fs/tree_copy.cc), the NFS shared records
// (backend/nfs/shared_records.cc), the fsGroup walk (node/fs_group.cc,
// which never reopens: it changes the inode through the O_PATH descriptor).
#pragma once

#include <sys/stat.h>

#include <string>

#include "base/status.h"
#include "base/unique_fd.h"

namespace nodevol {

enum class FileType { kRegular, kDirectory };

// `name` in dir as an O_PATH descriptor that does not follow a final
// symlink, and its stat. NOT_FOUND when it is not there.
Status OpenPathNoFollow(int dir, const std::string& name, UniqueFd* path_fd, struct stat* st);

// The inode behind an O_PATH descriptor opened with `flags` (O_RDONLY, and
// O_NONBLOCK etc. as wanted; O_CLOEXEC and O_NOCTTY are added), when it is
// of `type`; FAILED_PRECONDITION naming `what` and what it is instead.
Status ReopenAs(int path_fd, const struct stat& st, FileType type, int flags, const std::string& what, UniqueFd* out);

// Both: `name` in dir opened with `flags` only when it is of `type`.
Status OpenUntrusted(int dir, const std::string& name, FileType type, int flags, const std::string& what,
                     UniqueFd* out, struct stat* st);

// "a FIFO", "a character device", ... for messages.
const char* KindOf(mode_t mode);

}  // namespace nodevol
