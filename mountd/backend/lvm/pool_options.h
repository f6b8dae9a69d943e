// LvmPoolOptions: what an LVM pool is, from its options in the daemon
// config (--pool=name=fast,backend=lvm,vg=nodevol,type=thin,...):
//   vg=NAME                  volume group (required)
//   type=thick|thin          default thick
//   thinpool=NAME            thin pool LV in vg (thin; default "nodevol-thin")
//   thinpool-size=SIZE|N%    create the thin pool this big (bytes or percent
//                            of the VG) when it does not exist; without it a
//                            missing thin pool is an error
//   overprovision=RATIO      thin: virtual sizes may add up to RATIO x the
//                            pool's size (default 1.0, no overprovisioning)
//   fs=ext4|xfs              filesystem of new volumes (default ext4);
//                            a volume's fs_type may pick the other one
//   spare=SIZE               bytes held back from volumes (default 0)
//   lvcreate-options=ARGS    space-separated, appended to every lvcreate
// plus the disk selection keys of disks.h (devices, match-*, force).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backend/lvm/disks.h"
#include "base/status.h"
#include "node/volume.h"

namespace nodevol {

struct LvmPoolOptions {
  std::string vg;
  bool thin = false;
  std::string thinpool = "nodevol-thin";
  uint64_t thinpool_bytes = 0;    // one of these two, or neither
  unsigned thinpool_percent = 0;
  double overprovision = 1.0;
  std::string fs = "ext4";
  uint64_t spare = 0;
  std::vector<std::string> lvcreate_options;
  DiskRules disks;
};

// The filesystems LVM volumes can carry.
const std::vector<std::string>& LvmFsTypes();

// INVALID_ARGUMENT naming the pool, the option and the rule.
Status ParseLvmPoolOptions(const std::string& pool, const Params& options, LvmPoolOptions* out);

}  // namespace nodevol
