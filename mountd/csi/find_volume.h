// The volume a CSI volume_id names. CSI's answer for an id this node never
// gave is NOT_FOUND, including one that is no valid volume name (which
// the domain would call INVALID_ARGUMENT).
#pragma once

#include <string>

#include "base/names.h"
#include "node/node.h"

namespace nodevol::csi {

inline Status FindVolume(nodevol::Node* node, const std::string& id, VolumeView* out) {
  if (!ValidateVolumeName(id).ok()) return Status::NotFound("volume " + id + " does not exist on this node");
  return node->GetVolume(id, out);
}

}  // namespace nodevol::csi
