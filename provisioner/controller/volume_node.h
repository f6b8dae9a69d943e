// VolumeNode: the node to ask about an existing volume (delete, resize).
// A node-local volume lives on the PV's node. An NFS volume's record lives
// on the nodevold that created it (others serving the pool may share the
// export but do not know the volume, and would answer a delete "OK, was not
// there" while the directory stays): the PV's node when reachable, else a
// reachable node serving the pool as NFS that says (GetVolume) it knows
// the volume. nullptr when none can be asked now (*why says so).
#pragma once

#include <memory>
#include <string>

#include "controller/context.h"

namespace nodevol::provisioner {

std::shared_ptr<nodes::NodeClient> VolumeNode(ControllerContext& ctx, const std::string& volume,
                                              const std::string& node, const std::string& pool,
                                              const std::string& backend, std::string* why);

}  // namespace nodevol::provisioner
