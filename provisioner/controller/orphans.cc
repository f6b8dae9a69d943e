#include "controller/orphans.h"

#include <spdlog/spdlog.h>

#include <ctime>
#include <set>

namespace nodevol::provisioner {
namespace {

using nodes::VolumeParam;

// Why volume `v` on `node` is an orphan, or "" when it is not (or we
// cannot tell: the cluster could not be read).
std::string Orphaned(ControllerContext& ctx, const v1::Volume& v, const std::string& node) {
  VolumeView pv;
  auto cached = ctx.volumes->Get(v.name());
  kube::Result r = kube::Result::Ok();
  if (cached) {
    pv = *cached;
  } else {
    nlohmann::json live;
    r = ctx.client->Get("/api/v1/persistentvolumes/" + v.name(), &live);
    if (!r.ok() && r.code() != kube::Result::Code::kNotFound) return "";
    if (r.ok()) pv = DecodeVolume(live);
  }
  if (r.ok()) {
    // A PV of its name that names another node: this is a second copy
    // (an uncertain create placed again); nothing ever points at it, under
    // either reclaim policy. An NFS pool is one directory for every node.
    if (pv.node.empty() || pv.node == node) return "";
    if (v.backend() == "nfs" && pv.backend == "nfs" && pv.pool == v.pool()) return "";
    if (!ctx.options.Serves(pv.provisioned_by)) return "";
    return "its PV names node " + pv.node;
  }
  if (VolumeParam(v, "nodevol.io/reclaim-policy") != "Delete") return "";
  std::string ns = VolumeParam(v, "nodevol.io/pvc-namespace"), name = VolumeParam(v, "nodevol.io/pvc-name");
  nlohmann::json claim;
  r = ctx.client->Get("/api/v1/namespaces/" + ns + "/persistentvolumeclaims/" + name, &claim);
  if (r.ok() && "pvc-" + claim["metadata"].value("uid", "") == v.name()) return "";
  if (!r.ok() && r.code() != kube::Result::Code::kNotFound) return "";
  return "claim " + ns + "/" + name + " and its PV are gone";
}

}  // namespace

std::vector<std::string> SweepOrphans(ControllerContext& ctx, std::chrono::seconds grace) {
  std::vector<std::string> deleted;
  std::set<std::string> nodes;
  for (const auto& p : ctx.node_view->Pools())
    if (p.reachable) nodes.insert(p.node);
  const int64_t now = std::time(nullptr);
  for (const auto& node : nodes) {
    if (ctx.stop && ctx.stop->IsSet()) break;
    auto client = ctx.node_view->Client(node);
    if (!client) continue;
    v1::ListVolumesResponse list;
    Status st = client->ListAllVolumes(&list);
    if (!st.ok()) {
      spdlog::warn("orphan sweep: {}", st.message());
      continue;
    }
    for (const auto& v : list.volumes()) {
      if (ctx.stop && ctx.stop->IsSet()) break;
      if (!ctx.options.Serves(VolumeParam(v, "nodevol.io/provisioner"))) continue;
      if (v.ephemeral() || v.created_unix() + grace.count() > now) continue;
      if (v.name().rfind("pvc-", 0) != 0) continue;
      if (ctx.in_flight && ctx.in_flight->Contains(v.name())) continue;  // a pass is saving its PV
      const std::string why = Orphaned(ctx, v, node);
      if (why.empty()) continue;
      v1::DeleteVolumeRequest del;
      del.set_name(v.name());
      v1::DeleteVolumeResponse resp;
      st = client->DeleteVolume(del, &resp);
      if (!st.ok()) {
        spdlog::warn("orphan sweep: deleting {} on node {}: {}", v.name(), node, st.message());
        continue;
      }
      spdlog::warn("orphan sweep: deleted volume {} on node {} ({})", v.name(), node, why);
      deleted.push_back(v.name());
    }
  }
  return deleted;
}

}  // namespace nodevol::provisioner
