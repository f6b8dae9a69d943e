// Validation of pod volume directories ("targets").
//
// kubelet hands a FlexVolume driver
//   <pods root>/<podUID>/volumes/<vendor~driver>/<name>
// and a CSI driver
//   <pods root>/<podUID>/volumes/kubernetes.io~csi/<name>/mount
// where it makes <name> and the driver makes (and removes) "mount".
// nodevold mounts only there: a target must, after every symlink is
// resolved, have one of these forms under the configured (resolved) pods
// root. (Any valid file name is taken for "mount": csi-sanity uses
// "target", and the directory above is the pod's all the same.) Anything else — "..", ".", empty components, NUL bytes, a symlink
// leading out, another root — is INVALID_ARGUMENT, decided before anything
// on disk is touched.
#pragma once

#include <sys/stat.h>

#include <string>

#include "base/status.h"

namespace nodevol {

struct Target {
  std::string path;     // resolved absolute path
  std::string pod_uid;
  std::string plugin;   // "<vendor>~<driver>"
  std::string name;     // the pod's volume (a PV's name, or an inline volume's)
  std::string leaf;     // CSI: the directory the driver makes in <name>; "" for FlexVolume
  bool exists = false;  // the directory (a raw block target: the file) exists
  bool block = false;   // a raw block target (ResolveBlockTarget): a file, not a directory
};

// pods_root must be a resolved path (no symlinks, no trailing slash).
// When the target itself does not exist its parent must; with
// allow_missing_parent (Unpublish) a missing parent yields exists = false.
Status ResolveTarget(const std::string& pods_root, const std::string& path, Target* out,
                     bool allow_missing_parent = false);

// A raw block volume's target: kubelet gives a CSI driver
//   <kubelet root>/plugins/kubernetes.io/csi/volumeDevices/publish/<pv>/<podUID>
// (it makes <pv>; the driver makes the file <podUID> and binds the device
// onto it). block_root is that publish directory, resolved; the same rules
// as ResolveTarget, and an existing target must be a regular file.
Status ResolveBlockTarget(const std::string& block_root, const std::string& path, Target* out,
                          bool allow_missing_parent = false);

// Whether a publication's target still has a target's type: a directory,
// or for raw block a file (showing the device node while bound).
inline bool IsTargetType(unsigned mode) { return S_ISDIR(mode) || S_ISREG(mode) || S_ISBLK(mode); }

// `path` (absolute, no "." or ".." components) with every symlink of the
// part that exists resolved, and the rest (missing) appended as given:
// what a path kubelet names under a symlinked root resolves to, even after
// kubelet removed its last directories. Errors other than ENOENT fail.
Status ResolveExistingPart(const std::string& path, std::string* out);

// Resolves a directory given in configuration (realpath); it must exist.
Status ResolveConfiguredDir(const std::string& what, const std::string& path, std::string* out);

}  // namespace nodevol
