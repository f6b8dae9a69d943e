// The volume a CSI volume_id names. CSI's answer for an id this node never
// gave is NOT_FOUND, including one that is no valid volume name (which
// the domain would call INVALID_ARGUMENT).
#pragma once

#include <string>

#include "base/names.h"
#include "node/node.h"

namespace nodevol::csi {

// kubelet's id for an inline volume: "csi-" and the hex SHA-256 of the
// pod's UID and the volume's name (pkg/volume/csi makeVolumeHandle). It
// names no domain volume: the domain's name is made from the target.
inline bool IsInlineVolumeId(const std::string& id) {
  if (id.size() != 4 + 64 || id.compare(0, 4, "csi-") != 0) return false;
  for (size_t i = 4; i < id.size(); ++i)
    if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f'))) return false;
  return true;
}

inline Status FindVolume(nodevol::Node* node, const std::string& id, VolumeView* out) {
  if (!ValidateVolumeName(id).ok()) return Status::NotFound("volume " + id + " does not exist on this node");
  return node->GetVolume(id, out);
}

}  // namespace nodevol::csi
