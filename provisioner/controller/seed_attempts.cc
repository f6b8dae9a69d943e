#include "controller/seed_attempts.h"

#include <spdlog/spdlog.h>

#include <set>

namespace nodevol::provisioner {
namespace {

using nodes::VolumeParam;

// A page of a node's volumes within this, not the 60 s of a node call:
// every claim pass waits for the seeding (one lock), so a node that holds
// its connections and answers nothing (a frozen nodevold) held up every
// claim, for every node, for a minute (k8s_provisioner_node_cutoff). A
// node failing this is read again 10 s later (Attempts::kSeedRetry), then
// less and less often (up to 5 min between reads), and
// a page of 1000 volumes takes milliseconds.
constexpr std::chrono::seconds kSeedPageTimeout{5};

// Seeds from one node's volumes; false when they could not be read.
bool SeedFrom(ControllerContext& ctx, const std::string& node) {
  auto client = ctx.node_view->Client(node);
  if (!client) return false;
  v1::ListVolumesResponse list;
  if (Status st = client->ListAllVolumes(&list, kSeedPageTimeout); !st.ok()) {
    spdlog::warn("earlier creates on node {} not known yet: {}", node, st.message());
    return false;
  }
  int found = 0;
  for (const auto& v : list.volumes()) {
    if (v.ephemeral() || v.name().rfind("pvc-", 0) != 0) continue;
    if (!ctx.options.Serves(VolumeParam(v, "nodevol.io/provisioner"))) continue;
    if (ctx.volumes->Get(v.name())) continue;  // its PV is saved
    const std::string key = VolumeParam(v, "nodevol.io/pvc-namespace") + "/" + VolumeParam(v, "nodevol.io/pvc-name");
    auto claim = ctx.claims->Get(key);
    if (!claim || claim->PvName() != v.name() || !claim->volume_name.empty()) continue;
    ctx.attempts->SetIfAbsent(claim->uid, node);
    ++found;
  }
  if (found > 0)
    spdlog::info("node {} holds {} volume(s) of claims not yet provisioned: finishing them there", node, found);
  ctx.attempts->SetSeeded(node);
  return true;
}

}  // namespace

void SeedAttempts(ControllerContext& ctx) {
  if (!ctx.attempts || !ctx.node_view) return;
  const auto now = std::chrono::steady_clock::now();
  std::set<std::string> unread;
  for (const auto& p : ctx.node_view->Pools())
    if (p.reachable && ctx.attempts->SeedDue(p.node, now)) unread.insert(p.node);
  if (unread.empty()) return;
  std::lock_guard<std::mutex> lock(ctx.attempts->seed_mu());
  for (const auto& node : unread) {
    if (ctx.stop && ctx.stop->IsSet()) return;
    // Another pass may have read it (or failed to) while this one waited.
    if (ctx.attempts->SeedDue(node, now) && !SeedFrom(ctx, node)) ctx.attempts->SeedFailed(node, now);
  }
}

}  // namespace nodevol::provisioner
