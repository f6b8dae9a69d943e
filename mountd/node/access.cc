// Node: who may publish what. The two rules that keep a pod author, who
// writes a pod's flexVolume options freely, inside their own namespace and
// inside the operator's limits (docs/security.md, "Inline volume options"):
//
// 1. A named volume goes only into pods of the namespace its claim is in
//    (parameter nodevol.io/pvc-namespace, which the provisioner records).
//    kubelet's options cannot tell a PV's `volume:` from one a pod author
//    wrote inline: kubernetes.io/pvOrVolumeName is then the pod's own
//    volume name, which the author picks. What the author cannot write is
//    kubernetes.io/pod.namespace (the API reserves kubernetes.io/ keys), so
//    the namespace is what binds: a pod may use what a claim of its own
//    namespace could give it, as Kubernetes itself allows, and nothing else.
// 2. An inline volume takes only size, fsType and mode, from a pool whose
//    operator allowed inline volumes, up to the pool's inline-max-size; it
//    gets a generated name and storage place (Backend::InlineParameters).
#include "node/node.h"

namespace nodevol {
namespace {

constexpr char kClaimNamespace[] = "nodevol.io/pvc-namespace";

}  // namespace

void Node::SetInlinePolicies(std::map<std::string, InlinePolicy> policies) { inline_policies_ = std::move(policies); }

Status Node::CheckPodMayUse(const VolumeRecord& rec, const PodIdentity& pod, bool pod_required) const {
  if (rec.ephemeral)
    return Status::PermissionDenied("volume " + rec.spec.name +
                                    " is another pod's inline volume; it cannot be published by name");
  auto it = rec.spec.parameters.find(kClaimNamespace);
  // No pod: an operator's call on the root-only socket (nodevolctl), or a
  // kubelet that was not told to say (pod_required).
  if (pod.ns.empty() && pod_required && it != rec.spec.parameters.end())
    return Status::FailedPrecondition(
        "volume " + rec.spec.name + " belongs to a claim, and kubelet sent no pod namespace to check it against: "
        "the CSIDriver nodevol.io needs podInfoOnMount: true (deploy/ and the chart set it; kubectl get csidriver "
        "nodevol.io -o yaml)");
  if (pod.ns.empty()) return Status::Ok();
  if (it == rec.spec.parameters.end())
    return Status::PermissionDenied(
        "volume " + rec.spec.name + " records no claim namespace, so no pod may use it: a volume made by hand for a "
        "PV needs `nodevolctl volume create ... --param " + kClaimNamespace + "=<the PVC's namespace>` "
        "(the provisioner records it)");
  // The other namespace is not named: the message reaches the pod's events.
  if (it->second != pod.ns)
    return Status::PermissionDenied("volume " + rec.spec.name + " belongs to a claim of another namespace than " +
                                    pod.ns + " (pod " + pod.name + ")");
  return Status::Ok();
}

Status Node::InlineVolumeSpec(const InlineSpec& in, const std::string& name, VolumeSpec* out) const {
  Backend* b = FindPool(in.pool);
  auto policy = inline_policies_.find(in.pool);
  if (b && (policy == inline_policies_.end() || !policy->second.allowed))
    return Status::PermissionDenied("pool " + in.pool + " does not allow inline volumes; use a PersistentVolumeClaim, "
                                    "or ask the operator for inline=on in the pool's --pool");
  if (b && in.size_bytes > policy->second.max_bytes)
    return Status::InvalidArgument("inline volume size " + std::to_string(in.size_bytes) + " bytes is above pool " +
                                   in.pool + "'s inline-max-size of " + std::to_string(policy->second.max_bytes) +
                                   " bytes; ask for less, or use a PersistentVolumeClaim");
  Params params;
  for (const auto& [k, v] : in.parameters) {
    if (k != "mode")
      return Status::InvalidArgument("inline volumes take only size, fsType and mode; option \"" + k +
                                     "\" is for volumes the operator or the provisioner makes (use a "
                                     "PersistentVolumeClaim)");
    params[k] = v;
  }
  if (b)
    for (const auto& [k, v] : b->InlineParameters()) params[k] = v;
  *out = {name, in.pool, in.size_bytes, in.fs_type, params};
  return CheckSpec(*out);
}

}  // namespace nodevol
