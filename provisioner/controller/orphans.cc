#include "controller/orphans.h"

#include <spdlog/spdlog.h>

#include <ctime>
#include <set>

namespace nodevol::provisioner {
namespace {

std::string Param(const v1::Volume& v, const char* key) {
  auto it = v.parameters().find(key);
  return it == v.parameters().end() ? "" : it->second;
}

}  // namespace

std::vector<std::string> SweepOrphans(ControllerContext& ctx, std::chrono::seconds grace) {
  std::vector<std::string> deleted;
  std::set<std::string> nodes;
  for (const auto& p : ctx.node_view->Pools())
    if (p.reachable) nodes.insert(p.node);
  const int64_t now = std::time(nullptr);
  for (const auto& node : nodes) {
    auto client = ctx.node_view->Client(node);
    if (!client) continue;
    v1::ListVolumesResponse list;
    Status st = client->ListVolumes({}, &list);
    if (!st.ok()) {
      spdlog::warn("orphan sweep: {}", st.message());
      continue;
    }
    for (const auto& v : list.volumes()) {
      if (Param(v, "nodevol.io/provisioner") != ctx.options.provisioner_name) continue;
      if (Param(v, "nodevol.io/reclaim-policy") != "Delete" || v.ephemeral()) continue;
      if (v.created_unix() + grace.count() > now) continue;
      if (v.name().rfind("pvc-", 0) != 0) continue;
      if (ctx.volumes->Get(v.name())) continue;
      nlohmann::json obj;
      auto r = ctx.client->Get("/api/v1/persistentvolumes/" + v.name(), &obj);
      if (r.code() != kube::Result::Code::kNotFound) continue;  // exists, or we cannot tell
      std::string ns = Param(v, "nodevol.io/pvc-namespace"), name = Param(v, "nodevol.io/pvc-name");
      r = ctx.client->Get("/api/v1/namespaces/" + ns + "/persistentvolumeclaims/" + name, &obj);
      if (r.ok() && "pvc-" + obj["metadata"].value("uid", "") == v.name()) continue;
      if (!r.ok() && r.code() != kube::Result::Code::kNotFound) continue;
      v1::DeleteVolumeRequest del;
      del.set_name(v.name());
      v1::DeleteVolumeResponse resp;
      st = client->DeleteVolume(del, &resp);
      if (!st.ok()) {
        spdlog::warn("orphan sweep: deleting {} on node {}: {}", v.name(), node, st.message());
        continue;
      }
      spdlog::warn("orphan sweep: deleted volume {} on node {} (claim {}/{} and its PV are gone)", v.name(), node, ns,
                   name);
      deleted.push_back(v.name());
    }
  }
  return deleted;
}

}  // namespace nodevol::provisioner
