// Directory work below a mounted export: what CreateVolume and
// DeleteVolume of subdirectory volumes do on the server. Every function
// here may wait for the server; call them only on the server's worker
// (NfsServer::Call).
//
// Paths below the export are resolved with openat2(RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV) from the mount's root: a symlink
// made on the server (whose target the client would resolve in the node's
// own tree) or another filesystem under the export stops the call instead
// of being followed.
#pragma once

#include <chrono>
#include <string>

#include "backend/volume_root.h"
#include "base/status.h"
#include "base/unique_fd.h"

namespace nodevol {

// Asks the server for the attributes of `dir` (a mount point or a
// directory below one) afresh: ESTALE and a dead server show here.
Status StatFresh(const std::string& dir);

// Opens `rel` ("" = the root itself) below the mount at `root` as an
// O_PATH directory descriptor. NOT_FOUND when it is missing.
Status OpenBelow(const std::string& root, const std::string& rel, UniqueFd* out);

// mkdir -p of `rel` below `root`: missing parents get 0755, the last
// segment gets root.mode, and root.uid/gid when chown is set (left out by
// default: an export with root_squash refuses chown to root). An existing
// directory is reused (a retried create, or the provisioner's behaviour).
Status MakeVolumeDir(const std::string& root, const std::string& rel, const VolumeRoot& vroot, bool chown);

// Removes `rel` below `root` and everything in it, never following a
// symlink, until done (*done = true) or `until` passes (*done = false;
// call again to go on). Missing is done.
Status RemoveVolumeDir(const std::string& root, const std::string& rel,
                       std::chrono::steady_clock::time_point until, bool* done);

// Renames the last segment of `rel` to "archived-<segment>" in the same
// directory, or "archived-<segment>-<UTC time>[-N]" when that exists;
// *archived_as gets the new relative path. Missing is success ("").
Status ArchiveVolumeDir(const std::string& root, const std::string& rel, std::string* archived_as);

}  // namespace nodevol
