// What nodevold makes of a CSI VolumeCapability (access type and mode) for
// a pool: one place for CreateVolume, ValidateVolumeCapabilities and
// NodePublishVolume to decide alike.
#pragma once

#include <string>

#include "base/status.h"
#include "csi/v1/csi.pb.h"

namespace nodevol::csi {

struct Access {
  bool block = false;      // raw block, not a filesystem
  bool read_only = false;  // a *_READER_ONLY mode
  std::string fs_type;     // mount: the filesystem asked for ("" = the pool's default)
  std::vector<std::string> mount_flags;
};

// INVALID_ARGUMENT, naming what is wrong, for a capability without access
// type or mode.
Status ParseCapability(const ::csi::v1::VolumeCapability& cap, Access* out);

// Whether a pool of backend `kind` can serve `cap`: volumes on one node's
// disks (lvm, dir) cannot be written from several nodes; raw block needs
// lvm. "" = yes, else why not.
std::string Unsupported(const std::string& kind, const ::csi::v1::VolumeCapability& cap);

}  // namespace nodevol::csi
