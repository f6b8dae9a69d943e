// VolumeNode: the node to ask about an existing volume (delete, resize).
// A node-local volume lives on the PV's node. An NFS volume's record lives
// on the nodevold that created it and on the pool's export, where every
// node serving the pool finds it when asked with shared_pool (callers set
// it for NFS volumes; without it a node that does not know the volume
// would answer a delete "OK, was not there" while the directory stays):
// the PV's node when reachable, else a reachable node serving the pool as
// NFS that says (GetVolume) it knows the volume. nullptr when none can be
// asked now (*why says so).
#pragma once

#include <memory>
#include <string>

#include "controller/context.h"

namespace nodevol::provisioner {

std::shared_ptr<nodes::NodeClient> VolumeNode(ControllerContext& ctx, const std::string& volume,
                                              const std::string& node, const std::string& pool,
                                              const std::string& backend, std::string* why);

}  // namespace nodevol::provisioner
