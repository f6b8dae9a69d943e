// fsGroup ownership, applied by nodevold at publish instead of by kubelet.
//
// Like kubelet's SetVolumeOwnership: every file gets the group, group read
// and write, directories also group execute and setgid. Like kubelet's
// fsGroupChangePolicy OnRootMismatch, the tree is walked only when the
// volume root does not already have the group and setgid — so publishing a
// big, already-owned volume costs one stat.
//
// The volume belongs to pods, which may change it during the walk: the walk
// acts on descriptors only (fs/tree_walk.h), never follows a symlink,
// never leaves the volume's mount, and changes an entry through a
// descriptor of the very inode it checked. The root is changed last, so an
// interrupted or aborted walk is redone at the next Publish.
#pragma once

#include <sys/types.h>

#include <string>

#include "base/bounded_call.h"
#include "base/status.h"

namespace nodevol {

// `step` (if set) is called after each entry: the walk's progress, for a
// pool's DiskGate to bound (node/publish.cc).
Status ApplyFsGroup(const std::string& root, gid_t gid, const Step& step = {});

}  // namespace nodevol
