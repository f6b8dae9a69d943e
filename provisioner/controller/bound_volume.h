// BoundVolume: the PV a claim is bound to, only when the binding is mutual.
// A claim's spec.volumeName is written by the claim's author, who may name
// any PV in the cluster; a PV's claimRef is written by the PV controller
// and the provisioner. So a claim's volume is the PV it names only when
// that PV's claimRef names the claim back: namespace, name and uid. Every
// place the provisioner follows a claim to its volume goes through here:
// clones (data_source.cc) and resizes (resize.cc). Without it a Pending
// "bait" claim naming another namespace's PV, and a clone of the bait,
// copied the victim's data (issue 69, item 1; external-provisioner closed
// the same hole in 2019).
//
//   the claim names no PV, or the PV is not cached yet -> FAILED_PRECONDITION (wait)
//   the PV's claimRef names another claim (or none)   -> PERMISSION_DENIED, saying so
//   mutual                                             -> OK, *pv set
#pragma once

#include <memory>

#include "base/status.h"
#include "controller/claim.h"
#include "controller/context.h"
#include "controller/volume_view.h"

namespace nodevol::provisioner {

Status BoundVolume(ControllerContext& ctx, const ClaimView& claim, std::shared_ptr<const VolumeView>* pv);

}  // namespace nodevol::provisioner
