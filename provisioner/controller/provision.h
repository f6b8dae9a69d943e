// ProvisionClaim: one pass of the claim controller over one claim (key
// "namespace/name"; with `uid`, only while the cached claim has that uid),
// the reference library's provisionClaimOperation:
//
//   not ours / not yet / PV pvc-<uid> exists     -> done, nothing written
//   bad class parameters, block mode             -> Warning ProvisioningFailed, give up until the claim changes
//   Normal Provisioning; place (reserving the bytes); CreateVolume on the node
//     WaitForFirstConsumer and the selected node lacks room or is gone
//                                                -> drop selected-node (merge patch with
//                                                   resourceVersion) so the scheduler picks again
//     other failures                             -> Warning ProvisioningFailed, retry with backoff
//   save the PV (tries x pause; AlreadyExists = saved)
//     not saved                                  -> DeleteVolume, ProvisioningFailed (or
//                                                   ProvisioningCleanupFailed), retry
//   Normal ProvisioningSucceeded
//
// CreateVolume is idempotent on the node and the PV name is deterministic,
// so a provisioner killed anywhere in this sequence finishes the same
// volume on its next pass instead of making a second one.
#pragma once

#include <string>

#include "controller/context.h"
#include "queue/workers.h"

namespace nodevol::provisioner {

Workers::Outcome ProvisionClaim(ControllerContext& ctx, const std::string& key, const std::string& uid = "");

}  // namespace nodevol::provisioner
