#include "extender/extender.h"

#include <algorithm>
#include <set>

#include <spdlog/spdlog.h>

#include "base/size.h"

namespace nodevol::provisioner {

namespace {

struct PoolNeed {
  std::string backend;
  uint64_t bytes = 0;
};

// One candidate node's verdict.
struct Verdict {
  bool fits = false;
  bool resolvable = true;
  std::string why;
  uint64_t left = 0;  // room left after the pod, summed over its pools
};

Verdict Judge(const std::string& node, const std::map<std::string, PoolNeed>& need,
              const std::map<std::string, std::map<std::string, const PoolRoom*>>& by_node) {
  Verdict v;
  auto it = by_node.find(node);
  if (it == by_node.end()) {
    v.resolvable = false;
    v.why = "no nodevold registered on this node";
    return v;
  }
  std::string short_of;
  for (const auto& [pool, n] : need) {
    auto p = it->second.find(pool);
    if (p == it->second.end()) {
      v.resolvable = false;
      v.why = "nodevold here has no pool " + pool;
      return v;
    }
    const PoolRoom& r = *p->second;
    if (!n.backend.empty() && r.seen.backend != n.backend) {
      v.resolvable = false;
      v.why = "pool " + pool + " here is " + r.seen.backend + ", the class wants " + n.backend;
      return v;
    }
    if (!r.seen.reachable) {
      v.why = "nodevold unreachable, its pool " + pool + " cannot be checked";
      return v;
    }
    if (r.room() < n.bytes) {
      if (!short_of.empty()) short_of += "; ";
      short_of += "pool " + pool + " has " + FormatSize(r.room()) + " free";
      if (r.promised) short_of += " (" + FormatSize(r.promised) + " more promised to volumes not yet made)";
      short_of += ", this pod needs " + FormatSize(n.bytes);
      continue;
    }
    v.left = SaturatingAdd(v.left, r.room() - n.bytes);
  }
  if (!short_of.empty()) {
    v.why = short_of;
    return v;
  }
  v.fits = true;
  return v;
}

}  // namespace

Extender::Extender(CapacityLedger* ledger, ClaimFinder finder, PlacementPolicy policy, std::chrono::milliseconds hold)
    : ledger_(ledger), finder_(std::move(finder)), policy_(policy), hold_(hold) {}

namespace {

// Fills need->pools and need->verdicts for args' nodes from the ledger.
void Evaluate(CapacityLedger* ledger, const ExtenderArgs& args, std::vector<PendingClaim> claims,
              std::map<std::string, PoolNeed>* pools, std::map<std::string, Verdict>* verdicts) {
  std::set<std::string> except;
  for (const auto& c : claims) {
    except.insert(c.uid);
    PoolNeed& n = (*pools)[c.pool];
    n.bytes = SaturatingAdd(n.bytes, c.bytes);
    if (n.backend.empty()) n.backend = c.backend;
  }
  auto rooms = ledger->Rooms(except);
  std::map<std::string, std::map<std::string, const PoolRoom*>> by_node;
  for (const auto& r : rooms) by_node[r.seen.node][r.seen.pool] = &r;
  for (const auto& node : args.node_names) {
    Verdict v = Judge(node, *pools, by_node);
    for (const auto& c : claims)
      if (!c.node.empty() && c.node != node) {
        v = Verdict{};
        v.resolvable = false;
        v.why = "claim " + c.name + " is made from " + c.source + ", which is on node " + c.node;
        break;
      }
    (*verdicts)[node] = v;
  }
}

// The best fitting node by policy (ties: the smaller name), "" if none.
std::string Best(const std::map<std::string, Verdict>& verdicts, PlacementPolicy policy) {
  const std::string* best = nullptr;
  uint64_t best_left = 0;
  for (const auto& [node, v] : verdicts) {  // name order: the first of equals wins
    if (!v.fits) continue;
    bool better = !best || (policy == PlacementPolicy::kMostFree ? v.left > best_left : v.left < best_left);
    if (better) best = &node, best_left = v.left;
  }
  return best ? *best : "";
}

}  // namespace

FilterAnswer Extender::Filter(const ExtenderArgs& args) {
  FilterAnswer out;
  auto found = finder_(args.pod_namespace, args.claim_names);
  if (!found.unknown.empty()) {
    std::string names;
    for (const auto& n : found.unknown) names += (names.empty() ? "" : ", ") + args.pod_namespace + "/" + n;
    out.error = "claim " + names +
                " is not in nodevol-provisioner's cache yet (its watch of claims is behind kube-scheduler's); "
                "the pod is tried again after a backoff";
    spdlog::info("extender: pod {}/{}: {}", args.pod_namespace, args.pod_name, out.error);
    return out;
  }
  auto& claims = found.pending;
  if (claims.empty()) {
    out.nodes = args.node_names;
    return out;
  }
  // Decide and promise under the ledger's decision lock, as a provisioning
  // pass does: two pods filtered at once must see each other's promise.
  std::lock_guard<std::mutex> decide(ledger_->decide_mu());
  std::map<std::string, PoolNeed> pools;
  std::map<std::string, Verdict> verdicts;
  Evaluate(ledger_, args, claims, &pools, &verdicts);
  // Each reason names its node: kube-scheduler's FailedScheduling event
  // only counts equal reasons ("3 <reason>") and drops the names.
  for (const auto& node : args.node_names) {
    const Verdict& v = verdicts[node];
    if (v.fits) out.nodes.push_back(node);
    else if (v.resolvable) out.failed[node] = node + ": " + v.why;
    else out.unresolvable[node] = node + ": " + v.why;
  }
  out.promised = Best(verdicts, policy_);
  if (spdlog::should_log(spdlog::level::debug)) {
    std::string need;
    for (const auto& [pool, n] : pools) need += (need.empty() ? "" : ", ") + FormatSize(n.bytes) + " in " + pool;
    spdlog::debug("extender: pod {}/{} needs {}; {} of {} nodes fit; promised {}", args.pod_namespace,
                  args.pod_name, need, out.nodes.size(), args.node_names.size(),
                  out.promised.empty() ? "(none)" : out.promised);
  }
  if (!out.promised.empty()) {
    auto until = CapacityLedger::Clock::now() + hold_;
    for (const auto& c : claims)
      ledger_->Promise(c.uid, out.promised, c.pool, c.bytes, CapacityLedger::Kind::kScheduling, until);
  }
  return out;
}

std::vector<NodeScore> Extender::Prioritize(const ExtenderArgs& args) {
  std::vector<NodeScore> out;
  // Claims still unknown: Filter failed the pod, nothing to prefer.
  auto found = finder_(args.pod_namespace, args.claim_names);
  auto& claims = found.pending;
  if (claims.empty() || !found.unknown.empty()) {
    for (const auto& node : args.node_names) out.push_back({node, 0});
    return out;
  }
  std::map<std::string, PoolNeed> pools;
  std::map<std::string, Verdict> verdicts;
  Evaluate(ledger_, args, claims, &pools, &verdicts);
  uint64_t lo = UINT64_MAX, hi = 0;
  for (const auto& [node, v] : verdicts) {
    if (!v.fits) continue;
    lo = std::min(lo, v.left);
    hi = std::max(hi, v.left);
  }
  // The node Filter promised the pod's bytes to is the best, not the best
  // by the ledger now: between the two calls a burst moves promises to
  // selected nodes and settles creates, and a best recomputed here would
  // send the scheduler elsewhere while the promise stays; the next pods'
  // filters would overcommit the node it did pick until its selected-node
  // is read (a reschedule).
  std::string best = PromisedNode(claims);
  if (best.empty() || !verdicts[best].fits) best = Best(verdicts, policy_);
  for (const auto& node : args.node_names) {
    const Verdict& v = verdicts[node];
    int score = 0;
    if (node == best) {
      score = kMaxScore;
    } else if (v.fits) {
      // Linear between the fitting nodes' extremes, 1..kOtherMaxScore: far
      // below the promised node, so in-tree scores rarely outvote it.
      double span = static_cast<double>(hi - lo);
      double t = span > 0 ? static_cast<double>(v.left - lo) / span : 1.0;
      if (policy_ == PlacementPolicy::kBinpack && span > 0) t = 1.0 - t;
      score = static_cast<int>(t * (kOtherMaxScore - 1) + 0.5) + 1;  // a fitting node scores at least 1
    }
    out.push_back({node, score});
  }
  return out;
}

std::string Extender::PromisedNode(const std::vector<PendingClaim>& claims) const {
  std::string node;
  for (const auto& c : claims) {
    std::string n, pool;
    CapacityLedger::Kind kind;
    if (!ledger_->Find(c.uid, &n, &pool, &kind) || (!node.empty() && n != node)) return "";
    node = n;
  }
  return node;
}

}  // namespace nodevol::provisioner
