// Filesystems on block devices: make, grow, identify. nodevold runs the
// filesystem's own tools (mkfs.ext4, resize2fs, mkfs.xfs, xfs_growfs) with
// an argv and a deadline; which ones a pool needs is checked at start so a
// missing xfsprogs stops the daemon with a message rather than the first
// CreateVolume.
#pragma once

#include <chrono>
#include <string>

#include "base/status.h"

namespace nodevol {

// Absolute path of a system tool (searched in /usr/sbin, /sbin, /usr/bin,
// /bin); FAILED_PRECONDITION naming the package that ships it otherwise.
Status FindTool(const std::string& name, std::string* path);

// FAILED_PRECONDITION unless the tools for `fs` are installed.
Status CheckFsTools(const std::string& fs);

// How long mkfs or a grow may run by default (nodevold's
// --mkfs-timeout-seconds): large volumes take a while even with lazy init.
constexpr std::chrono::milliseconds kFsToolTimeout = std::chrono::minutes(10);

// Makes `fs` on a device that holds nothing yet: ext4 without reserved
// blocks and with lazy inode-table and journal initialisation, xfs with
// defaults; neither discards (a new LV has nothing worth discarding).
Status MakeFs(const std::string& fs, const std::string& device,
              std::chrono::milliseconds timeout = kFsToolTimeout);

// Grows the filesystem mounted at `mountpoint` (from `device`) to fill
// the device, online. Growing one that already fills it succeeds.
Status GrowFs(const std::string& fs, const std::string& device, const std::string& mountpoint,
              std::chrono::milliseconds timeout = kFsToolTimeout);

// The filesystem type libblkid finds on `device` ("" when none).
Status ProbeFsType(const std::string& device, std::string* fs);

}  // namespace nodevol
