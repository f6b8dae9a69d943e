#include "capacity/ledger.h"

#include <string_view>

#include "base/size.h"

namespace nodevol::provisioner {

uint64_t BaseRoom(const PoolSeen& p) {
  if (p.size_enforced || p.backend == "nfs") return p.free_bytes;
  uint64_t unmade = p.total_bytes > p.allocated_bytes ? p.total_bytes - p.allocated_bytes : 0;
  return std::min(p.free_bytes, unmade);
}

namespace {

// Whether the node's figures include a finished create's volume. A report
// received after the create returned may have been taken before it (the
// sample was under way), and one taken after it may arrive before the
// create's answer: only the sample numbers tell. Without them (an older
// nodevold), figures that changed after the answer are taken to have it.
template <class E>
bool Reported(const E& e, const PoolSeen& seen) {
  if (e.included_from && seen.sample) return seen.sample >= e.included_from;
  return seen.figures_at > e.settled_at;
}

}  // namespace

CapacityLedger::CapacityLedger(Source source, std::chrono::milliseconds linger)
    : source_(std::move(source)), linger_(linger) {}

std::vector<PoolRoom> CapacityLedger::Rooms(const std::set<std::string>& except, Clock::time_point now) const {
  std::vector<PoolRoom> out;
  for (auto& seen : source_()) {
    PoolRoom r;
    r.base = BaseRoom(seen);
    r.seen = std::move(seen);
    out.push_back(std::move(r));
  }
  // Each promise finds its pool through an index: a burst holds thousands
  // of promises, and the extender reads the rooms of every node per pod.
  std::map<std::pair<std::string_view, std::string_view>, PoolRoom*> index;
  for (auto& r : out) index.emplace(std::pair<std::string_view, std::string_view>(r.seen.node, r.seen.pool), &r);
  // A promise on storage several nodes share (an NFS export) is made on
  // one node's pool but takes the bytes from all of them: each node
  // reports the whole export's free space (issue 30 item 8).
  std::map<std::string_view, std::vector<PoolRoom*>> sharing;
  for (auto& r : out)
    if (!r.seen.shared_by.empty()) sharing[r.seen.shared_by].push_back(&r);
  auto add = [&](const Entry& e, bool subtract) {
    auto it = index.find({e.node, e.pool});
    if (it == index.end() || (e.settled && Reported(e, it->second->seen))) return;
    PoolRoom* own = it->second;
    // A claim the scheduler chose a node for that cannot fit there even
    // with nothing else promised (a typo'd 1000Ti) is rescheduled, not
    // made: counted, it would leave the node no room for anyone while it
    // waits (issue 19, found in k8s_provisioner's failover).
    if (e.kind != Kind::kCreating && e.bytes > own->base) return;
    auto count = [&](PoolRoom* r) { r->promised = subtract ? r->promised - e.bytes : SaturatingAdd(r->promised, e.bytes); };
    if (own->seen.shared_by.empty()) return count(own);
    for (PoolRoom* r : sharing[own->seen.shared_by]) count(r);
  };
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, e] : entries_)
    if (now < e.until) add(e, false);
  // The few keys left out are taken back out, rather than every promise
  // looked up among them.
  for (const auto& key : except) {
    auto it = entries_.find(key);
    if (it != entries_.end() && now < it->second.until) add(it->second, true);
  }
  return out;
}

bool CapacityLedger::Promise(const std::string& key, const std::string& node, const std::string& pool,
                             uint64_t bytes, Kind kind, Clock::time_point until) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = Clock::now();
    SweepLocked(now);
    auto it = entries_.find(key);
    // A create running, or done: its volume is (or is about to be) in the
    // node's figures, and a weaker promise would count it twice.
    if (kind != Kind::kCreating) {
      if (it != entries_.end() && it->second.kind == Kind::kCreating && now < it->second.until) return false;
      if (auto m = made_.find(key); m != made_.end() && now < m->second) return false;
    }
    if (kind == Kind::kCreating) until = Clock::time_point::max();
    Entry e;
    e.node = node;
    e.pool = pool;
    e.bytes = bytes;
    e.kind = kind;
    e.until = until;
    if (it != entries_.end() && it->second.node == node && it->second.pool == pool && it->second.bytes == bytes &&
        it->second.kind == kind) {
      it->second.until = until;  // renewed: nothing anyone reads changed
      return true;
    }
    entries_[key] = e;
  }
  Changed();
  return true;
}

void CapacityLedger::Settle(const std::string& key, bool ok, Clock::time_point now, uint64_t included_from) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it == entries_.end() || it->second.kind != Kind::kCreating) return;
    if (ok) {
      it->second.settled = true;
      it->second.settled_at = now;
      it->second.included_from = included_from;
      it->second.until = now + linger_;
      made_[key] = now + kMadeFor;
      return;  // still counted: no change
    }
    entries_.erase(it);
    made_.erase(key);
  }
  Changed();
}

void CapacityLedger::Release(const std::string& key) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Done: the claim went (or bound), so nothing needs to be kept out
    // any longer; its bytes count until the node's figures include the
    // volume, as before.
    made_.erase(key);
    auto it = entries_.find(key);
    if (it == entries_.end()) return;
    if (it->second.kind == Kind::kCreating) return;  // running: it ends with Settle
    entries_.erase(it);
  }
  Changed();
}

bool CapacityLedger::Find(const std::string& key, std::string* node, std::string* pool, Kind* kind,
                          Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end() || now >= it->second.until) return false;
  *node = it->second.node;
  *pool = it->second.pool;
  *kind = it->second.kind;
  return true;
}

CapacityLedger::Clock::time_point CapacityLedger::NextExpiry() const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = Clock::now();
  auto next = Clock::time_point::max();
  for (const auto& [_, e] : entries_)
    if (e.until > now) next = std::min(next, e.until);  // ended ones linger in the map until a sweep
  return next;
}

void CapacityLedger::SweepLocked(Clock::time_point now) {
  if (now < swept_ + std::chrono::seconds(1)) return;
  swept_ = now;
  for (auto it = entries_.begin(); it != entries_.end();)
    it = now >= it->second.until ? entries_.erase(it) : std::next(it);
  for (auto it = made_.begin(); it != made_.end();) it = now >= it->second ? made_.erase(it) : std::next(it);
}

void CapacityLedger::SetOnChange(std::function<void()> on_change) {
  std::lock_guard<std::mutex> lock(mu_);
  on_change_ = std::move(on_change);
}

void CapacityLedger::Changed() {
  std::function<void()> f;
  {
    std::lock_guard<std::mutex> lock(mu_);
    f = on_change_;
  }
  if (f) f();
}

}  // namespace nodevol::provisioner
