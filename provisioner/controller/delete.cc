#include "controller/delete.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "controller/volume_node.h"
#include "kube/fields.h"

namespace nodevol::provisioner {


namespace {

using Outcome = Workers::Outcome;
using nlohmann::json;

// Reads and patches of the PV's finalizer before the pass is retried whole.
constexpr int kFinalizerAttempts = 5;

// Ours, Released, reclaim Delete.
bool Deletable(const ControllerContext& ctx, const VolumeView& pv) {
  return ctx.options.Serves(pv.provisioned_by) && pv.reclaim_policy == "Delete" && pv.phase == "Released";
}

}  // namespace

Workers::Outcome DeleteReleasedVolume(ControllerContext& ctx, const std::string& pv_name) {
  auto cached = ctx.volumes->Get(pv_name);
  if (!cached || !Deletable(ctx, *cached)) return Outcome::kDone;
  // The cache may lag (an admin's switch to Retain, a rebind): decide on
  // the PV as it is now, as the reference library does.
  json live_pv;
  auto live = ctx.client->Get("/api/v1/persistentvolumes/" + pv_name, &live_pv);
  auto finished = [&](const std::string& uid) {
    if (ctx.deleted) ctx.deleted->Remove(uid);
    return Outcome::kDone;
  };
  if (live.code() == kube::Result::Code::kNotFound) return finished(cached->uid);
  if (!live.ok()) {
    spdlog::warn("volume {}: reading the PV: {}", pv_name, live.ToString());
    return Outcome::kRetry;
  }
  const VolumeView pv = DecodeVolume(live_pv);
  // Being deleted and no longer held by our finalizer: an earlier pass
  // deleted the volume and released the PV, which waits for the PV
  // controller's own finalizer now. Updates meanwhile queue it again;
  // asking the node once more would be a second DeleteVolume.
  if (pv.deleting && !pv.our_finalizer) return finished(pv.uid);
  if (!Deletable(ctx, pv)) {
    spdlog::info("volume {}: no longer Released with reclaim Delete; not deleting", pv_name);
    return Outcome::kDone;
  }

  // The PV controller says Released; check the claim ourselves, live.
  if (!pv.claim_name.empty()) {
    json claim;
    auto r = ctx.client->Get("/api/v1/namespaces/" + pv.claim_ns + "/persistentvolumeclaims/" + pv.claim_name,
                             &claim);
    if (r.ok() && claim["metadata"].value("uid", "") == pv.claim_uid) {
      spdlog::info("volume {}: Released but claim {}/{} still exists; not deleting", pv_name, pv.claim_ns,
                   pv.claim_name);
      return Outcome::kDone;
    }
    if (!r.ok() && r.code() != kube::Result::Code::kNotFound) return Outcome::kRetry;
  }

  // From here on this pass is a deletion attempt (the reference library's
  // updateDeleteStats): every return below counts once.
  const auto start = std::chrono::steady_clock::now();
  const std::string& cls = pv.class_name;
  auto failed = [&] {
    if (ctx.metrics) ctx.metrics->DeleteFailed(cls);
    return Outcome::kRetry;
  };
  auto done = [&] {
    if (ctx.metrics)
      ctx.metrics->DeleteSucceeded(cls,
                                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return finished(pv.uid);
  };
  // An earlier pass of this process deleted the volume and then failed on
  // the PV: finish the PV only.
  if (!ctx.deleted || !ctx.deleted->Contains(pv.uid)) {
    const std::string &node = pv.node, &pool = pv.pool, &backend = pv.backend;
    std::string why;
    auto client = VolumeNode(ctx, pv_name, node, pool, backend, &why);
    if (!client) {
      ctx.events->Record(pv.Ref(), "Warning", "VolumeFailedDelete",
                         why + "; the volume is deleted once its nodevold answers again");
      return failed();
    }
    v1::DeleteVolumeRequest req;
    req.set_name(pv_name);
    if (backend == "nfs") req.set_shared_pool(pool);  // any node serving the pool can delete it
    v1::DeleteVolumeResponse resp;
    Status st = client->DeleteVolume(req, &resp);
    if (!st.ok()) {
      ctx.events->Record(pv.Ref(), "Warning", "VolumeFailedDelete", st.message());
      return failed();
    }
    spdlog::info("volume {}: deleted on node {} ({})", pv_name, client->node(),
                 resp.existed() ? "existed" : "was gone");
    if (ctx.deleted) ctx.deleted->Add(pv.uid);
  }

  std::string path = "/api/v1/persistentvolumes/" + pv_name;
  auto r = ctx.client->Delete(path, {pv.uid, ""});
  if (!r.ok() && r.code() != kube::Result::Code::kNotFound) {
    spdlog::warn("volume {}: deleting the PV: {}", pv_name, r.ToString());
    return failed();
  }
  // The finalizer held the PV object; release it now that the data is gone.
  // A conflict (the PV changed between the read and the patch: the PV
  // controller, a label) retries only the read and the patch: going round
  // the whole delete again would ask the node once more per conflict.
  for (int attempt = 0; attempt < kFinalizerAttempts; ++attempt) {
    json fresh;
    r = ctx.client->Get(path, &fresh);
    if (r.code() == kube::Result::Code::kNotFound) return done();
    if (!r.ok()) break;
    if (fresh["metadata"].value("uid", "") != pv.uid) return done();
    json keep = json::array();
    bool had = false;
    for (const auto& f : fresh["metadata"].value("finalizers", json::array()))
      if (f == kFinalizer) had = true; else keep.push_back(f);
    if (!had) return done();
    json patch = {{"metadata", {{"finalizers", keep}, {"resourceVersion", fresh["metadata"].value("resourceVersion", "")}}}};
    r = ctx.client->MergePatch(path, patch);
    if (r.ok() || r.code() == kube::Result::Code::kNotFound) return done();
    if (r.code() != kube::Result::Code::kConflict) break;
  }
  spdlog::warn("volume {}: removing finalizer: {}", pv_name, r.ToString());
  return failed();
}

}  // namespace nodevol::provisioner
