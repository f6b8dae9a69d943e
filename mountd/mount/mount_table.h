// MountTable: a snapshot of this process's mount table
// (/proc/self/mountinfo), read by libmount.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace nodevol {

struct MountEntry {
  int id = 0;
  int parent_id = 0;
  std::string target;   // mount point
  std::string source;   // device or server:/export
  std::string fstype;
  std::string root;     // path inside the source filesystem (bind mounts)
  std::string options;  // VFS and fs options, comma-separated
};

class MountTable {
 public:
  // Reads /proc/self/mountinfo (or another mountinfo file, for tests).
  Status Load(const std::string& path = "/proc/self/mountinfo");

  // The top-most mount whose mount point is exactly `path`, or nullptr.
  const MountEntry* FindTarget(const std::string& path) const;
  // Mounts whose mount point lies strictly below dir.
  std::vector<const MountEntry*> Below(const std::string& dir) const;
  const std::vector<MountEntry>& entries() const { return entries_; }

 private:
  std::vector<MountEntry> entries_;
};

}  // namespace nodevol
