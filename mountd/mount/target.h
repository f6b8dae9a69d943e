// Validation of pod volume directories ("targets").
//
// kubelet hands the driver <pods root>/<podUID>/volumes/<vendor~driver>/<name>.
// nodevold mounts only there: a target must, after every symlink is
// resolved, have exactly that form under the configured (resolved) pods
// root. Anything else — "..", ".", empty components, NUL bytes, a symlink
// leading out, another root — is INVALID_ARGUMENT, decided before anything
// on disk is touched.
#pragma once

#include <string>

#include "base/status.h"

namespace nodevol {

struct Target {
  std::string path;     // resolved absolute path
  std::string pod_uid;
  std::string plugin;   // "<vendor>~<driver>"
  std::string name;
  bool exists = false;  // the directory exists
};

// pods_root must be a resolved path (no symlinks, no trailing slash).
// When the target itself does not exist its parent must; with
// allow_missing_parent (Unpublish) a missing parent yields exists = false.
Status ResolveTarget(const std::string& pods_root, const std::string& path, Target* out,
                     bool allow_missing_parent = false);

// Resolves a directory given in configuration (realpath); it must exist.
Status ResolveConfiguredDir(const std::string& what, const std::string& path, std::string* out);

}  // namespace nodevol
