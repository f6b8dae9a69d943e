#include "placement/placement.h"

#include "base/size.h"

namespace nodevol::provisioner {

Status ParsePlacementPolicy(const std::string& text, PlacementPolicy* out) {
  if (text == "most-free") {
    *out = PlacementPolicy::kMostFree;
  } else if (text == "binpack") {
    *out = PlacementPolicy::kBinpack;
  } else {
    return Status::InvalidArgument("placement policy \"" + text + "\": use most-free or binpack");
  }
  return Status::Ok();
}

Status Place(const std::vector<PoolRoom>& rooms, const PlacementRequest& req, PlacementPolicy policy,
             std::string* node) {
  const PoolSeen* best = nullptr;
  uint64_t best_room = 0;
  bool any_pool = false, any_unreachable = false;
  std::string why;
  auto note = [&](const std::string& n, const std::string& text) { why += (why.empty() ? "" : "; ") + n + ": " + text; };
  for (const auto& r : rooms) {
    const PoolSeen& s = r.seen;
    if (s.pool != req.pool) continue;
    if ((req.restrict_nodes || !req.allowed_nodes.empty()) && !req.allowed_nodes.count(s.node)) continue;
    if (!req.backend.empty() && s.backend != req.backend) {
      note(s.node, "pool " + s.pool + " is " + s.backend + ", the class wants " + req.backend);
      continue;
    }
    if (!s.reachable) {
      any_unreachable = true;
      note(s.node, "nodevold unreachable");
      continue;
    }
    any_pool = true;
    uint64_t room = r.room();
    if (room < req.bytes) {
      note(s.node, FormatSize(room) + " free" + (r.promised ? " (" + FormatSize(r.promised) + " promised)" : ""));
      continue;
    }
    bool better = !best || (policy == PlacementPolicy::kMostFree ? room > best_room : room < best_room) ||
                  (room == best_room && s.node < best->node);
    if (better) best = &s, best_room = room;
  }
  if (best) {
    *node = best->node;
    return Status::Ok();
  }
  std::string what = "pool " + req.pool + (req.backend.empty() ? "" : " (" + req.backend + ")");
  if (any_pool)
    return Status::ResourceExhausted("no node has room for " + FormatSize(req.bytes) + " in " + what + ": " + why);
  if (any_unreachable) return Status::Unavailable("no reachable node has " + what + ": " + why);
  return Status::FailedPrecondition("no " + std::string(req.restrict_nodes || !req.allowed_nodes.empty() ? "allowed " : "") +
                                    "node runs nodevold with " + what + (why.empty() ? "" : ": " + why));
}

}  // namespace nodevol::provisioner
