#include "controller/bound_volume.h"

namespace nodevol::provisioner {

Status BoundVolume(ControllerContext& ctx, const ClaimView& claim, std::shared_ptr<const VolumeView>* pv) {
  const std::string who = "claim " + claim.Key();
  if (claim.volume_name.empty()) return Status::FailedPrecondition(who + " is not bound yet");
  auto v = ctx.volumes->Get(claim.volume_name);
  if (!v) return Status::FailedPrecondition(who + "'s PV " + claim.volume_name + " is not known yet");
  if (v->claim_uid != claim.uid || v->claim_ns != claim.ns || v->claim_name != claim.name)
    return Status::PermissionDenied(who + " names PV " + claim.volume_name + ", which is bound to " +
                                    (v->claim_name.empty() ? std::string("no claim")
                                                           : "claim " + v->claim_ns + "/" + v->claim_name) +
                                    ": a claim's volume is only the PV that names it back");
  *pv = std::move(v);
  return Status::Ok();
}

}  // namespace nodevol::provisioner
