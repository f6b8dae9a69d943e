// ProbeBlkid: what libblkid finds at the start of a block device —
// superblock type and usage, partition table type — read-only (libblkid
// opens O_RDONLY and never writes). The one libblkid call site, shared by
// disk selection (signature.cc) and filesystem detection (filesystem.cc).
#pragma once

#include <string>

#include "base/status.h"

namespace nodevol {

struct BlkidFindings {
  std::string type;    // "ext4", "LVM2_member", ... ("" = none)
  std::string usage;   // "filesystem", "raid", "crypto", ...
  std::string pttype;  // "dos", "gpt" ("" = none)
  bool found = false;  // some signature, named or not
  bool conflicting = false;  // several signatures that contradict each other
};

// FromErrno when the device cannot be opened, INTERNAL when probing fails.
Status ProbeBlkid(const std::string& device, BlkidFindings* out);

}  // namespace nodevol
