// The label that routes kube-scheduler to the replica serving the
// extender. Only the leader serves it (a standby does not listen), so the
// Service in deploy/extender selects the pods labelled
// nodevol.io/extender=serving, and each replica keeps the label true of
// itself: it removes it at start (a container restarted after a crash
// may still carry it), retrying until the apiserver takes it (and is not
// ready meanwhile), and sets it once it serves; a replica that loses
// the Lease exits, and its restart removes it again. For a moment after
// a leader dies both pods may carry it; the dead one is not Ready, so
// the Service already sends nothing there.
#pragma once

#include <chrono>
#include <functional>
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

// Sets or removes the label until the apiserver takes it: the usual reason
// a replica is not the leader is an apiserver it cannot reach, and a
// standby that gave up after one failed PATCH stayed behind the Service
// (issue 57, item 8). Between tries it calls wait(retry), which returns
// false to give up (the program stops); a warning every `warn_every`
// failures. True once the label is as asked.
bool MarkServingUntilDone(kube::Api* api, const std::string& ns, const std::string& pod, bool serving,
                          const std::function<bool(std::chrono::milliseconds)>& wait,
                          std::chrono::milliseconds retry = std::chrono::seconds(2), int warn_every = 15);

}  // namespace nodevol::provisioner
