// Removing a dir pool's trees: a volume being deleted, a snapshot, a copy
// left half-made by a crash. Pods own everything inside those trees.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace nodevol {

// Removes parent/name and everything below it, by descriptors only
// (fs/tree_walk.h): never follows a symlink, never enters another mount
// (FAILED_PRECONDITION), and copes with trees deeper than PATH_MAX, which
// a pod can make. A missing parent/name is OK. `step` (optional) is called
// after each entry removed.
Status RemoveTree(const std::string& parent, const std::string& name, const std::function<void()>& step = {});

// FAILED_PRECONDITION when anything is mounted at or below one of `dirs`:
// a delete must never reach into a mount. (A device check cannot tell: on
// overlayfs files report their layer's device, not the directory's.)
Status CheckNoMountsIn(const std::vector<std::string>& dirs);

}  // namespace nodevol
