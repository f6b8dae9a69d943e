#include "controller/resize.h"

#include <spdlog/spdlog.h>

#include "base/size.h"
#include "controller/bound_volume.h"
#include "controller/claim.h"
#include "controller/events.h"
#include "controller/volume_node.h"
#include "kube/quantity.h"

namespace nodevol::provisioner {

using Outcome = Workers::Outcome;
using nlohmann::json;

namespace {

// A CSI PV's claim status, as external-resizer keeps it (KEP-1790; kubelet
// reads allocatedResourceStatuses and acts on nothing else). `storage`
// goes to allocatedResourceStatuses.storage ("" removes it); `resizing`
// sets or drops the Resizing condition (FileSystemResizePending is never
// left behind: nodevold grows the filesystem with the volume).
kube::Result PatchCsiClaimStatus(ControllerContext& ctx, const ClaimView& pvc, const json& status_fields,
                                 const std::string& storage, bool resizing) {
  json conditions = json::array();
  if (pvc.conditions.is_array())
    for (const auto& c : pvc.conditions)
      if (!c.is_object() || (c.value("type", "") != "Resizing" && c.value("type", "") != "FileSystemResizePending"))
        conditions.push_back(c);
  if (resizing)
    conditions.push_back({{"type", "Resizing"}, {"status", "True"}, {"lastTransitionTime", NowRfc3339()}});
  json status = status_fields;
  status["conditions"] = conditions;
  status["allocatedResourceStatuses"] = {{"storage", storage.empty() ? json(nullptr) : json(storage)}};
  std::string path = "/api/v1/namespaces/" + pvc.ns + "/persistentvolumeclaims/" + pvc.name + "/status";
  return ctx.client->MergePatch(path, {{"status", status}});
}

}  // namespace

Workers::Outcome ResizeClaim(ControllerContext& ctx, const std::string& key) {
  auto pvc = ctx.claims->Get(key);
  if (!pvc) return Outcome::kDone;
  const ClaimView& claim = *pvc;
  if (!claim.error.ok()) return Outcome::kDone;
  // Only the claim this PV names back (a rebound PV keeps its claimRef uid).
  std::shared_ptr<const VolumeView> pv;
  if (!BoundVolume(ctx, claim, &pv).ok()) return Outcome::kDone;
  if (!ctx.options.Serves(pv->provisioned_by)) return Outcome::kDone;
  const uint64_t pv_bytes = pv->capacity_bytes;
  if (pv_bytes == 0) return Outcome::kDone;
  // A CSI PV's claim gets its new capacity from the resizer (here), not
  // from kubelet: finish a resize whose PV grew before a restart.
  const bool csi = pv->csi;
  const uint64_t status_bytes = claim.status_bytes;
  if (claim.request_bytes <= pv_bytes) {
    // Only a Bound claim: one being bound (volumeName set, phase not yet
    // Bound) gets its capacity from the PV controller's next write, which
    // a patch here made conflict (409) and retry: one more of its requests
    // per claim, the pace of a whole burst (provision-bench's audit log:
    // 311 of 1000 claims).
    if (!csi || !claim.bound || status_bytes >= pv_bytes) return Outcome::kDone;
    auto r = PatchCsiClaimStatus(ctx, claim, {{"capacity", {{"storage", kube::FormatBinaryBytes(pv_bytes)}}}}, "",
                                 false);
    if (!r.ok()) {
      spdlog::warn("claim {}: recording capacity {}: {}", key, FormatSize(pv_bytes), r.ToString());
      return Outcome::kRetry;
    }
    return Outcome::kDone;
  }

  const std::string &node = pv->node, &pool = pv->pool, &backend = pv->backend;
  std::string why;
  auto client = VolumeNode(ctx, claim.volume_name, node, pool, backend, &why);
  std::string want = FormatSize(claim.request_bytes);
  if (!client) {
    ctx.events->Record(claim.Ref(), "Warning", "VolumeResizeFailed",
                       why + "; resizing to " + want + " once its nodevold answers");
    return Outcome::kRetry;
  }
  ctx.events->Record(claim.Ref(), "Normal", "Resizing", "External resizer is resizing volume " + claim.volume_name);
  if (csi) {
    auto r = PatchCsiClaimStatus(
        ctx, claim, {{"allocatedResources", {{"storage", kube::FormatBinaryBytes(claim.request_bytes)}}}},
        "ControllerResizeInProgress", true);
    if (!r.ok()) {
      spdlog::warn("claim {}: marking the resize in progress: {}", key, r.ToString());
      return Outcome::kRetry;
    }
  }
  v1::ExpandVolumeRequest req;
  req.set_name(claim.volume_name);
  req.set_size_bytes(claim.request_bytes);
  if (backend == "nfs") req.set_shared_pool(pool);  // any node serving the pool can resize it
  v1::ExpandVolumeResponse resp;
  Status st = client->ExpandVolume(req, &resp);
  if (!st.ok()) {
    ctx.events->Record(claim.Ref(), "Warning", "VolumeResizeFailed", "resize to " + want + ": " + st.message());
    bool final = st.code() == Status::Code::kInvalidArgument;
    // Infeasible lets the user take the request back (KEP-1790 recovery).
    if (csi && final) {
      json fresh;
      if (ctx.client->Get("/api/v1/namespaces/" + claim.ns + "/persistentvolumeclaims/" + claim.name, &fresh).ok())
        PatchCsiClaimStatus(ctx, DecodeClaim(fresh), json::object(), "ControllerResizeInfeasible", false);
    }
    return final ? Outcome::kGiveUp : Outcome::kRetry;
  }
  uint64_t now_bytes = std::max<uint64_t>(resp.volume().size_bytes(), claim.request_bytes);
  std::string path = "/api/v1/persistentvolumes/" + claim.volume_name;
  std::string rv = pv->resource_version;
  kube::Result r;
  for (int attempt = 0; attempt < 3; ++attempt) {
    json patch = {{"metadata", {{"resourceVersion", rv}}},
                  {"spec", {{"capacity", {{"storage", kube::FormatBinaryBytes(now_bytes)}}}}}};
    r = ctx.client->MergePatch(path, patch);
    if (r.code() != kube::Result::Code::kConflict) break;
    // The PV changed under us; kube-controller-manager's own expand
    // controller may have raised the capacity already (it does so for
    // FlexVolume drivers in its plugin dir, leaving the real work to
    // kubelet's expandfs).
    json fresh;
    if (!ctx.client->Get(path, &fresh).ok()) break;
    uint64_t fresh_bytes = 0;
    kube::Quantity q;
    if (kube::Quantity::Parse(fresh["spec"].value("capacity", json::object()).value("storage", ""), &q).ok() &&
        q.ToBytes(&fresh_bytes).ok() && fresh_bytes >= now_bytes) {
      r = kube::Result::Ok();
      break;
    }
    rv = fresh["metadata"].value("resourceVersion", "");
  }
  if (!r.ok()) {
    spdlog::warn("claim {}: volume grown but PV {} capacity not updated: {}", key, claim.volume_name, r.ToString());
    return Outcome::kRetry;  // Conflict included: the next pass sees the fresh PV
  }
  if (csi) {
    // The filesystem grew with the volume (nodevold's ExpandVolume): no
    // node step is left, as after a ControllerExpandVolume that answers
    // node_expansion_required = false.
    json fresh;
    kube::Result got = ctx.client->Get("/api/v1/namespaces/" + claim.ns + "/persistentvolumeclaims/" + claim.name,
                                       &fresh);
    if (got.ok())
      got = PatchCsiClaimStatus(ctx, DecodeClaim(fresh), {{"capacity", {{"storage", kube::FormatBinaryBytes(now_bytes)}}}}, "",
                                false);
    if (!got.ok()) {
      spdlog::warn("claim {}: volume grown, claim status not updated: {}", key, got.ToString());
      return Outcome::kRetry;
    }
  }
  ctx.events->Record(claim.Ref(), "Normal", "VolumeResizeSuccessful",
                     "volume " + claim.volume_name + " is now " + FormatSize(now_bytes) +
                         (csi ? "; the filesystem grew online" : "; the filesystem grows online, kubelet records the new capacity"));
  spdlog::info("claim {}: {} resized to {}", key, claim.volume_name, FormatSize(now_bytes));
  return Outcome::kDone;
}

}  // namespace nodevol::provisioner
