#include "net/admission.h"

#include <algorithm>

namespace nodevol::net {

Admission::Admission(AdmissionLimits limits)
    : limits_(limits),
      per_peer_(limits.max_per_peer ? limits.max_per_peer : std::max<size_t>(1, limits.max_connections / 2)) {
  limits_.max_connections = std::max<size_t>(1, limits_.max_connections);
  per_peer_ = std::min(per_peer_, limits_.max_connections);
}

Admission::Id Admission::Victim(const std::string& peer) const {
  // By rule: strangers, then (where anyone authenticates) the idle, then
  // the busy. Within a rule, the entry of the address holding the most
  // connections goes first, the oldest (or longest unchanged) of its
  // entries among equals: a flood from a few addresses takes its own
  // places before anyone else's.
  const ConnState order[] = {ConnState::kNew, ConnState::kIdle, ConnState::kBusy};
  for (ConnState want : order) {
    if (want != ConnState::kNew && !limits_.evict_idle) break;
    Id best = 0;
    size_t best_count = 0;
    Clock::time_point best_since = Clock::time_point::max();
    for (const auto& [id, e] : conns_) {
      if (e.state != want || (!peer.empty() && e.peer != peer)) continue;
      size_t count = peer_count(e.peer);
      if (count > best_count || (count == best_count && e.since < best_since)) {
        best = id;
        best_count = count;
        best_since = e.since;
      }
    }
    if (best) return best;
  }
  return 0;
}

Admission::Verdict Admission::Arrive(const std::string& peer, Clock::time_point now) {
  Verdict v;
  if (peer_count(peer) >= per_peer_) {
    v.evict = Victim(peer);
    if (!v.evict) return v;
  } else if (conns_.size() >= limits_.max_connections) {
    v.evict = Victim("");
    if (!v.evict) return v;
  }
  if (v.evict) Erase(v.evict);
  v.id = next_++;
  conns_[v.id] = Entry{peer, ConnState::kNew, now};
  ++peers_[peer];
  return v;
}

void Admission::Set(Id id, ConnState state, Clock::time_point now) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  it->second.state = state;
  it->second.since = now;
}

void Admission::Remove(Id id) { Erase(id); }

void Admission::Erase(Id id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  auto p = peers_.find(it->second.peer);
  if (p != peers_.end() && --p->second == 0) peers_.erase(p);
  conns_.erase(it);
}

std::vector<Admission::Id> Admission::Expired(Clock::time_point now) {
  std::vector<Id> out;
  for (const auto& [id, e] : conns_) {
    if (e.state == ConnState::kNew && now - e.since >= limits_.handshake_timeout) out.push_back(id);
    if (e.state == ConnState::kIdle && limits_.idle_timeout.count() > 0 && now - e.since >= limits_.idle_timeout)
      out.push_back(id);
  }
  for (Id id : out) Erase(id);
  return out;
}

size_t Admission::peer_count(const std::string& peer) const {
  auto it = peers_.find(peer);
  return it == peers_.end() ? 0 : it->second;
}

}  // namespace nodevol::net
