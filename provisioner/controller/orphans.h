// SweepOrphans: deletes volumes this provisioner made that nothing in the
// cluster points at any more, so a provisioner killed between CreateVolume
// and saving the PV (and whose claim was then deleted) leaks nothing.
//
// A volume on a reachable node whose PV (same name) names ANOTHER node is
// a second copy left by an uncertain create placed again: an orphan under
// either reclaim policy, once older than `grace` (not for NFS volumes of
// the same pool: one directory for every node). Otherwise it is an orphan
// only when ALL hold:
//   - its claim parameters say this provisioner made it with reclaim Delete
//     (a Retain volume whose PV was deleted by hand is the operator's data);
//   - it is older than `grace` and not ephemeral;
//   - no provisioning pass of this process is working on it (InFlight);
//   - no PV of its name exists (cache and a live GET);
//   - its claim (namespace/name from the parameters) does not exist with the
//     uid in the volume's name (an existing claim is still being provisioned:
//     the claim controller finishes the same volume).
// Returns the names deleted; failures are logged and retried next sweep.
// Ends early when ctx.stop is set.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "controller/context.h"

namespace nodevol::provisioner {

std::vector<std::string> SweepOrphans(ControllerContext& ctx, std::chrono::seconds grace);

}  // namespace nodevol::provisioner
