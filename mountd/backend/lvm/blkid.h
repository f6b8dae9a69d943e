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
  // A partition's entry in its disk's table: GPT type GUID or MBR type
  // ("0x8e"); "" for a whole disk.
  std::string part_entry_type, part_entry_scheme;
  bool found = false;  // some signature, named or not (a partition entry alone is none)
  bool conflicting = false;  // several signatures that contradict each other
};

// GPT is looked for even behind a missing or damaged protective MBR
// (BLKID_PARTS_FORCE_GPT): such a disk is not blank.
// FromErrno when the device cannot be opened, INTERNAL when probing fails.
Status ProbeBlkid(const std::string& device, BlkidFindings* out);

}  // namespace nodevol
