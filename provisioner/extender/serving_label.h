// The label that routes kube-scheduler to the replica serving the
// extender. Only the leader serves it (a standby does not listen), so the
// Service in deploy/extender selects the pods labelled
// nodevol.io/extender=serving, and each replica keeps the label true of
// itself: it removes it at start (a container restarted after a crash
// may still carry it) and sets it once it serves; a replica that loses
// the Lease exits, and its restart removes it again. For a moment after
// a leader dies both pods may carry it; the dead one is not Ready, so
// the Service already sends nothing there.
#pragma once

#include <string>

#include "base/status.h"
#include "kube/api.h"

namespace nodevol::provisioner {

inline constexpr char kServingLabel[] = "nodevol.io/extender";
inline constexpr char kServingValue[] = "serving";

// Sets (serving) or removes the label on pod ns/name with a merge patch.
// UNAVAILABLE naming the pod when the apiserver refuses or cannot be
// reached (RBAC: pods patch in the provisioner's namespace).
Status MarkServing(kube::Api* api, const std::string& ns, const std::string& pod, bool serving);

}  // namespace nodevol::provisioner
