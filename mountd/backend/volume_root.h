// VolumeRoot: who owns a new volume's top directory and with which mode,
// from the volume parameters `mode` (octal), `uid` and `gid`. Shared by the
// backends that make a fresh directory or filesystem per volume (dir, lvm)
// so one StorageClass parameter means the same thing on each.
#pragma once

#include <sys/types.h>

#include <string>

#include "base/status.h"
#include "node/volume.h"

namespace nodevol {

struct VolumeRoot {
  // 0777 by default so pods of any uid can write, like hostPath
  // provisioners; fsGroup (applied at publish) narrows it per pod.
  mode_t mode = 0777;
  uid_t uid = 0;
  gid_t gid = 0;
};

// INVALID_ARGUMENT for a bad value or any other parameter (claim
// parameters, backend/claim_params.h, are accepted and ignored), naming
// `kind` ("a dir volume") and the known parameters.
Status ParseVolumeRoot(const std::string& kind, const Params& params, VolumeRoot* out);

// chown + chmod of `dir` (never following a symlink).
Status ApplyVolumeRoot(const std::string& dir, const VolumeRoot& root);

}  // namespace nodevol
