// ResizeClaim: one pass over a bound claim (key "namespace/name") whose
// request grew past its PV's capacity, for PVs we provisioned. FlexVolume
// has no working controller-side resize in Kubernetes, so the provisioner
// plays external-resizer's part:
//
//   ExpandVolume on the PV's node (nodevold checks room and grows the
//   volume and its filesystem online; idempotent)
//     failure -> Warning VolumeResizeFailed on the claim, retry with backoff
//   PV spec.capacity = the new size (merge patch with resourceVersion)
//   Normal VolumeResizeSuccessful; kubelet then sees the claim's status
//   capacity below the PV's, calls the driver's expandfs (a no-op now)
//   and records the new capacity in the claim's status.
//
// The apiserver only lets a claim grow when its class has
// allowVolumeExpansion, so that is not checked again here.
#pragma once

#include <string>

#include "controller/context.h"
#include "queue/workers.h"

namespace nodevol::provisioner {

Workers::Outcome ResizeClaim(ControllerContext& ctx, const std::string& key);

}  // namespace nodevol::provisioner
