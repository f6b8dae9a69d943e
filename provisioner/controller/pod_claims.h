// PodClaims: the other claims of the pod a WaitForFirstConsumer claim was
// selected for, so a pod with several nodevol claims is provisioned all on
// one node or not at all (docs/scheduling.md, "Pods with several claims").
// kube-scheduler writes selected-node on each of the pod's claims before it
// binds the pod, so that pod is one of the namespace's pods with no node
// yet; one LIST of those (fieldSelector spec.nodeName=) finds it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "controller/claim.h"
#include "controller/context.h"
#include "extender/extender.h"

namespace nodevol::provisioner {

struct SiblingClaim {
  ClaimView claim;
  std::string pool;  // its class's pool
};

// The unbound claims of classes we serve, other than `claim`, of the
// unscheduled pods in claim's namespace that use it (persistentVolumeClaim
// and generic ephemeral volumes). Empty when no such pod exists (the pod
// went, or the claim was not selected for a pod). UNAVAILABLE when the
// pods cannot be listed.
Status PodSiblings(ControllerContext& ctx, const ClaimView& claim, std::vector<SiblingClaim>* out);

// The pool of a claim's class, when the class is ours and its parameters
// parse; "" otherwise. *wffc: the class waits for the first consumer.
std::string ClassPool(ControllerContext& ctx, const ClaimView& claim, bool* wffc = nullptr);

// The extender's view of a pod's claims (extender/extender.h): those of
// `names` in namespace ns that exist, are unbound and not being deleted,
// and whose class is ours and waits for the first consumer. An Immediate
// claim is not counted: its volume is made wherever there is room, and
// kube-scheduler waits for it to be bound before placing the pod. Names
// the cache does not hold are listed in `unknown`.
PodClaims PendingPodClaims(ControllerContext& ctx, const std::string& ns, const std::vector<std::string>& names);

// Removes selected-node from claim (uid-guarded), giving the scheduler the
// choice back. OK when done, or the claim is gone or changed meanwhile.
Status RemoveSelectedNode(ControllerContext& ctx, const ClaimView& claim);

// How long a selected node's promise lasts: kube-scheduler's
// bindTimeoutSeconds, after which it gives the pod's claims up.
inline constexpr auto kSelectedFor = std::chrono::minutes(10);

// Keeps the ledger's kSelected promise of one claim in step with it: a
// claim of a WaitForFirstConsumer class we serve that carries selected-node
// and is not bound holds its bytes on that node (bounded: the scheduler
// waits 10 min for it to be bound); any other state releases it. Called on
// every claim add and update; UntrackClaim on delete.
void TrackClaim(ControllerContext& ctx, const ClaimView& pvc);
void UntrackClaim(ControllerContext& ctx, const ClaimView& pvc);

}  // namespace nodevol::provisioner
