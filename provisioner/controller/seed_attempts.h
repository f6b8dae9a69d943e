// SeedAttempts: what a new leader (or a restarted provisioner) learns from
// the nodes before it places a claim: a volume pvc-<uid> of ours on node N
// whose claim (uid) is still unbound and has no PV is an earlier process's
// create, so the claim's attempt is N (Attempts::SetIfAbsent) and the next
// pass finishes that volume instead of making another elsewhere.
//
// Each reachable node is read once per process (ListVolumes, paged), the
// first time a pass finds it unread; a node that fails is read again by a
// pass at least Attempts::kSeedRetry (10 s) later. A node unreachable at that time, or a create still running
// on a node as it is read, can leave a second copy once the claim is placed
// elsewhere: its PV then names another node and the orphan sweep deletes
// it. Ends early when ctx.stop is set.
#pragma once

#include "controller/context.h"

namespace nodevol::provisioner {

void SeedAttempts(ControllerContext& ctx);

}  // namespace nodevol::provisioner
