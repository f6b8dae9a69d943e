// The mount table with each mount's device, as the NFS backend needs it
// to tell who uses a staging mount. Read from /proc/self/mountinfo by
// libmount; reading it never asks an NFS server anything.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "base/status.h"

namespace nodevol {

struct MountInfo {
  std::string target;   // mount point
  std::string source;   // "server:/export[/path]" for NFS
  std::string fstype;   // "nfs", "nfs4", ...
  std::string options;  // VFS and filesystem options, comma-separated
  dev_t dev = 0;        // the superblock's device: shared by a mount and its binds
};

Status LoadMountInfo(std::vector<MountInfo>* out, const std::string& path = "/proc/self/mountinfo");

// The top-most mount at exactly `target`, or nullptr.
const MountInfo* FindMount(const std::vector<MountInfo>& mounts, const std::string& target);

inline bool IsNfsType(const std::string& fstype) { return fstype == "nfs" || fstype == "nfs4"; }

}  // namespace nodevol
