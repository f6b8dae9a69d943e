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
  Id idle = 0;
  Clock::time_point idle_since = Clock::time_point::max();
  for (const auto& [id, e] : conns_) {
    if (!peer.empty() && e.peer != peer) continue;
    if (e.state == ConnState::kNew) return id;  // the oldest stranger: ids rise with arrival
    if (limits_.evict_idle && e.state == ConnState::kIdle && e.since < idle_since) {
      idle = id;
      idle_since = e.since;
    }
  }
  return idle;
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
