// fsGroup ownership, applied by nodevold at publish instead of by kubelet.
//
// Like kubelet's SetVolumeOwnership: every file gets the group, group read
// and write, directories also group execute and setgid. Like kubelet's
// fsGroupChangePolicy OnRootMismatch, the tree is walked only when the
// volume root does not already have the group and setgid — so publishing a
// big, already-owned volume costs one stat. The walk stays on the volume's
// filesystem and never follows symlinks.
#pragma once

#include <sys/types.h>

#include <string>

#include "base/status.h"

namespace nodevol {

Status ApplyFsGroup(const std::string& root, gid_t gid);

}  // namespace nodevol
