// Project quotas (ext4 with the "project" feature mounted prjquota, or xfs
// mounted prjquota): a directory gets a project id with the inherit flag,
// so everything created below it is charged to that id, and the id gets a
// hard block limit. statfs() on such a directory then reports the limit,
// which is what kubelet's volume metrics show.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace nodevol {

// OK when the filesystem holding dir accounts and enforces project quotas;
// otherwise FAILED_PRECONDITION saying why.
Status ProbeProjectQuota(const std::string& dir);
Status GetProjectId(const std::string& dir, uint32_t* id);
// Sets dir's project id and FS_XFLAG_PROJINHERIT.
Status SetProjectId(const std::string& dir, uint32_t id);
// Sets the hard (and soft) block limit of project id, on dir's filesystem.
Status SetProjectLimit(const std::string& dir, uint32_t id, uint64_t bytes);
// Whether anything on dir's filesystem is charged to project id (blocks or
// inodes). Project ids are per filesystem, not per directory.
Status ProjectIdInUse(const std::string& dir, uint32_t id, bool* in_use);
// Bytes charged to project id on dir's filesystem (0 for an id not used).
Status GetProjectUsage(const std::string& dir, uint32_t id, uint64_t* bytes);

}  // namespace nodevol
