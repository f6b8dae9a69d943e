// DeleteVolume: one pass of the volume controller over one PV (key = PV
// name), the reference library's deleteVolumeOperation:
//
//   not provisioned by us, not Released, reclaim not Delete  -> done
//   its claim still exists with the claimRef's uid            -> done (never
//                                                               delete data a claim still owns)
//   DeleteVolume on the PV's node (NFS: any reachable node with the pool)
//     failure / node unknown                                  -> Warning VolumeFailedDelete, retry with backoff
//   DELETE the PV with a uid precondition, drop our finalizer
#pragma once

#include <string>

#include "controller/context.h"
#include "queue/workers.h"

namespace nodevol::provisioner {

Workers::Outcome DeleteReleasedVolume(ControllerContext& ctx, const std::string& pv_name);

}  // namespace nodevol::provisioner
