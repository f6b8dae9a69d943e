#include "controller/pod_claims.h"

#include <spdlog/spdlog.h>

#include "controller/data_source.h"
#include "kube/fields.h"
#include "storageclass/class_params.h"

namespace nodevol::provisioner {

using nlohmann::json;

namespace {

// The claim names a pod's volumes use (a generic ephemeral volume's claim
// is named <pod>-<volume>).
std::vector<std::string> ClaimNames(const json& pod) {
  std::vector<std::string> out;
  const std::string pod_name = pod["metadata"].value("name", "");
  for (const auto& v : pod.value("spec", json::object()).value("volumes", json::array())) {
    if (!v.is_object()) continue;
    if (v.contains("persistentVolumeClaim") && v["persistentVolumeClaim"].is_object())
      out.push_back(v["persistentVolumeClaim"].value("claimName", ""));
    else if (v.contains("ephemeral"))
      out.push_back(pod_name + "-" + v.value("name", ""));
  }
  return out;
}

}  // namespace

namespace {

// Whether class_name is a class of ours whose parameters parse.
bool OurClass(ControllerContext& ctx, const std::string& class_name, ClassParams* params, bool* wffc) {
  auto sc = ctx.classes->Get(class_name);
  if (!sc || !ctx.options.Serves(sc->value("provisioner", ""))) return false;
  if (!ParseClassParams(kube::StringMap(sc->value("parameters", json::object())),
                        kube::Strings(sc->value("mountOptions", json())), params)
           .ok())
    return false;
  *wffc = sc->value("volumeBindingMode", "Immediate") == "WaitForFirstConsumer";
  return true;
}

}  // namespace

std::string ClassPool(ControllerContext& ctx, const ClaimView& claim, bool* wffc) {
  if (!ctx.options.Serves(claim.provisioner)) return "";
  ClassParams params;
  bool waits = false;
  if (!OurClass(ctx, claim.class_name, &params, &waits)) return "";
  if (wffc) *wffc = waits;
  return params.pool;
}

PodClaims PendingPodClaims(ControllerContext& ctx, const std::string& ns, const std::vector<std::string>& names) {
  PodClaims found;
  auto& out = found.pending;
  for (const auto& name : names) {
    auto pvc = ctx.claims->Get(ns + "/" + name);
    if (!pvc) {
      found.unknown.push_back(name);
      continue;
    }
    // Unbound claims only: a bound one's PV pins the node.
    if (!pvc->error.ok() || !pvc->volume_name.empty() || pvc->deleting || !pvc->has_class) continue;
    const ClaimView& c = *pvc;
    // Not ClassPool: the PV controller names the provisioner on a
    // waiting claim only after a node is selected, and the extender runs before.
    ClassParams params;
    bool wffc = false;
    if (!OurClass(ctx, c.class_name, &params, &wffc) || !wffc) continue;
    PendingClaim pending{c.uid, c.name, params.pool, params.backend, c.request_bytes, "", ""};
    // A restore or clone can only be made where its source is; a source
    // that cannot be resolved (yet) is the provisioner's to report.
    VolumeSource source;
    if (ResolveDataSource(ctx, c, &source).ok() && source.kind != VolumeSource::Kind::kNone) {
      pending.node = source.node;
      pending.source = source.description;
    }
    out.push_back(std::move(pending));
  }
  return found;
}

Status PodSiblings(ControllerContext& ctx, const ClaimView& claim, std::vector<SiblingClaim>* out) {
  out->clear();
  json pods;
  auto r = ctx.client->Get("/api/v1/namespaces/" + claim.ns + "/pods?fieldSelector=spec.nodeName%3D", &pods);
  if (!r.ok()) return Status::Unavailable("listing the pods of namespace " + claim.ns + ": " + r.ToString());
  std::set<std::string> seen = {claim.name};
  for (const auto& pod : pods.value("items", json::array())) {
    auto names = ClaimNames(pod);
    if (std::find(names.begin(), names.end(), claim.name) == names.end()) continue;
    for (const auto& name : names) {
      if (!seen.insert(name).second) continue;
      auto pvc = ctx.claims->Get(claim.ns + "/" + name);
      if (!pvc || !pvc->error.ok() || !pvc->volume_name.empty() || pvc->deleting) continue;
      SiblingClaim s;
      s.claim = *pvc;
      s.pool = ClassPool(ctx, s.claim);
      if (!s.pool.empty()) out->push_back(std::move(s));
    }
  }
  return Status::Ok();
}

Status RemoveSelectedNode(ControllerContext& ctx, const ClaimView& claim) {
  json patch = {{"metadata", {{"uid", claim.uid}, {"annotations", {{kAnnSelectedNode, nullptr}}}}}};
  auto r = ctx.client->MergePatch("/api/v1/namespaces/" + claim.ns + "/persistentvolumeclaims/" + claim.name, patch);
  if (r.ok() || r.code() == kube::Result::Code::kNotFound || r.code() == kube::Result::Code::kConflict)
    return Status::Ok();
  return Status::Unavailable("removing " + std::string(kAnnSelectedNode) + " from claim " + claim.Key() + ": " +
                             r.ToString());
}

void TrackClaim(ControllerContext& ctx, const ClaimView& c) {
  if (!ctx.ledger) return;
  if (!c.error.ok()) return;
  // Not ClassPool: before a node is selected the claim names no
  // provisioner yet.
  ClassParams params;
  bool wffc = false;
  if (!OurClass(ctx, c.class_name, &params, &wffc) || !wffc || !c.volume_name.empty() || c.deleting) {
    ctx.ledger->Release(c.uid);
    return;
  }
  const std::string& pool = params.pool;
  std::string node, promised_pool;
  CapacityLedger::Kind kind;
  if (c.selected_node.empty()) {
    // Waiting for the scheduler. The extender's promise for it stands
    // (the claim's own add event, or any update, often arrives after the
    // extender let its pod through); a selected-node that was removed
    // (a reschedule) ends the promise it held.
    if (ctx.ledger->Find(c.uid, &node, &promised_pool, &kind) && kind == CapacityLedger::Kind::kSelected)
      ctx.ledger->Release(c.uid);
    return;
  }
  // Already promised there (by the extender, or in a pass for a sibling):
  // keep that promise's end only if it is the longer one.
  bool found = ctx.ledger->Find(c.uid, &node, &promised_pool, &kind);
  if (found && kind != CapacityLedger::Kind::kScheduling && node == c.selected_node && promised_pool == pool) return;
  // Until this update, the next pods were filtered with these bytes on the
  // wrong node: the likeliest cause of a reschedule in a burst.
  if (found && kind == CapacityLedger::Kind::kScheduling && node != c.selected_node)
    spdlog::info("claim {}: kube-scheduler chose node {}, the extender had promised it {}", c.Key(),
                 c.selected_node, node);
  ctx.ledger->Promise(c.uid, c.selected_node, pool, c.request_bytes, CapacityLedger::Kind::kSelected,
                      CapacityLedger::Clock::now() + kSelectedFor);
}

void UntrackClaim(ControllerContext& ctx, const ClaimView& pvc) {
  if (ctx.ledger) ctx.ledger->Release(pvc.uid);
}

}  // namespace nodevol::provisioner
