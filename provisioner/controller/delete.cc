#include "controller/delete.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "kube/fields.h"

namespace nodevol::provisioner {

using kube::Str;

namespace {

using Outcome = Workers::Outcome;
using nlohmann::json;

}  // namespace

Workers::Outcome DeleteReleasedVolume(ControllerContext& ctx, const std::string& pv_name) {
  auto cached = ctx.volumes->Get(pv_name);
  if (!cached) return Outcome::kDone;
  const json& pv = *cached;
  const json& meta = pv["metadata"];
  auto ann = meta.value("annotations", json::object());
  if (Str(ann, kAnnProvisionedBy) != ctx.options.provisioner_name) return Outcome::kDone;
  const json& spec = pv["spec"];
  std::string phase = pv.value("status", json::object()).value("phase", "");
  if (spec.value("persistentVolumeReclaimPolicy", "") != "Delete" || phase != "Released") return Outcome::kDone;

  // The PV controller says Released; check the claim ourselves, live.
  const json& ref = spec.value("claimRef", json::object());
  if (!ref.empty()) {
    json claim;
    auto r = ctx.client->Get("/api/v1/namespaces/" + Str(ref, "namespace") + "/persistentvolumeclaims/" +
                                 Str(ref, "name"),
                             &claim);
    if (r.ok() && claim["metadata"].value("uid", "") == Str(ref, "uid")) {
      spdlog::info("volume {}: Released but claim {}/{} still exists; not deleting", pv_name, Str(ref, "namespace"),
                   Str(ref, "name"));
      return Outcome::kDone;
    }
    if (!r.ok() && r.code() != kube::Result::Code::kNotFound) return Outcome::kRetry;
  }

  // From here on this pass is a deletion attempt (the reference library's
  // updateDeleteStats): every return below counts once.
  const auto start = std::chrono::steady_clock::now();
  const std::string cls = MetricClassOfVolume(pv);
  auto failed = [&] {
    if (ctx.metrics) ctx.metrics->DeleteFailed(cls);
    return Outcome::kRetry;
  };
  auto done = [&] {
    if (ctx.metrics)
      ctx.metrics->DeleteSucceeded(cls,
                                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return Outcome::kDone;
  };
  std::string node = Str(ann, kAnnNode), pool = Str(ann, kAnnPool), backend = Str(ann, kAnnBackend);
  std::shared_ptr<nodes::NodeClient> client;
  if (backend == "nfs") {
    // The export is shared: any reachable node serving the pool can delete.
    for (const auto& p : ctx.node_view->Pools())
      if (p.pool == pool && p.reachable && (client = ctx.node_view->Client(p.node))) break;
  } else {
    client = ctx.node_view->Client(node);
  }
  if (!client) {
    ctx.events->Record(pv, "Warning", "VolumeFailedDelete",
                       "node " + node + " (pool " + pool + ") is not reachable; the volume is deleted once its "
                       "nodevold answers again");
    return failed();
  }
  v1::DeleteVolumeRequest req;
  req.set_name(pv_name);
  v1::DeleteVolumeResponse resp;
  Status st = client->DeleteVolume(req, &resp);
  if (!st.ok()) {
    ctx.events->Record(pv, "Warning", "VolumeFailedDelete", st.message());
    return failed();
  }
  spdlog::info("volume {}: deleted on node {} ({})", pv_name, client->node(), resp.existed() ? "existed" : "was gone");

  std::string path = "/api/v1/persistentvolumes/" + pv_name;
  auto r = ctx.client->Delete(path, {Str(meta, "uid"), ""});
  if (!r.ok() && r.code() != kube::Result::Code::kNotFound) {
    spdlog::warn("volume {}: deleting the PV: {}", pv_name, r.ToString());
    return failed();
  }
  // The finalizer held the PV object; release it now that the data is gone.
  json fresh;
  r = ctx.client->Get(path, &fresh);
  if (r.code() == kube::Result::Code::kNotFound) return done();
  if (!r.ok()) return failed();
  if (fresh["metadata"].value("uid", "") != Str(meta, "uid")) return done();
  json keep = json::array();
  bool had = false;
  for (const auto& f : fresh["metadata"].value("finalizers", json::array()))
    if (f == kFinalizer) had = true; else keep.push_back(f);
  if (!had) return done();
  json patch = {{"metadata", {{"finalizers", keep}, {"resourceVersion", fresh["metadata"].value("resourceVersion", "")}}}};
  r = ctx.client->MergePatch(path, patch);
  if (r.ok() || r.code() == kube::Result::Code::kNotFound) return done();
  spdlog::warn("volume {}: removing finalizer: {}", pv_name, r.ToString());
  return failed();
}

}  // namespace nodevol::provisioner
