// Admission: which connections a listener keeps when strangers flood it.
// The bookkeeping behind net::Acceptor, apart from sockets so that its
// rules can be tested with a clock of the test's own.
//
// A connection is, in this order of its life:
//   kNew   accepted, not yet authenticated (TLS handshake or, on a plain
//          server, its first request header still to come);
//   kIdle  authenticated, waiting for its next request;
//   kBusy  a request in progress (for a relay: authenticated, for good).
// The rules, for a listener that is full (max_connections) or a peer
// address at its own cap (max_per_peer):
//   1. the newcomer takes the place of a kNew connection, of the peer's own
//      when the peer is at its cap, else of anyone's: an idle socket or a
//      stalled handshake costs its holder the slot, never a client that
//      has proven itself;
//   2. failing that, on a listener with evict_idle (plain HTTP, where
//      anyone can become kIdle or kBusy by sending a request) a kIdle
//      connection gives way, then a kBusy one (a stranger can keep a
//      request busy for ever by reading its answer slowly);
//   3. failing that the newcomer is refused: where authentication means
//      something, an authenticated client, idle or busy, is never dropped
//      for a stranger's sake.
// Within a rule the victim is taken from the address that holds the most
// connections (the oldest, or longest unchanged, of its entries), so a
// flood from a few addresses replaces its own connections, not those of
// the one client that came in meanwhile. A peer is a remote IP address;
// one address never holds more than max_per_peer. Expiry (Expired) closes
// kNew connections past the handshake deadline and kIdle ones past the
// idle deadline.
//
// Not thread-safe: one thread (the listener's) calls everything.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace nodevol::net {

enum class ConnState { kNew, kIdle, kBusy };

struct AdmissionLimits {
  size_t max_connections = 64;
  size_t max_per_peer = 0;  // 0: half of max_connections (at least 1)
  bool evict_idle = false;  // rule 2: kIdle and kBusy may be evicted too
  // kNew past this is expired: the time a client has to authenticate
  // (counted from arrival, or from the last Set to kNew).
  std::chrono::milliseconds handshake_timeout{3000};
  // kIdle past this is expired; zero: never.
  std::chrono::milliseconds idle_timeout{0};
};

class Admission {
 public:
  using Clock = std::chrono::steady_clock;
  using Id = uint64_t;  // 0 is no connection

  struct Verdict {
    Id id = 0;     // the newcomer's id; 0: refused (rule 3)
    Id evict = 0;  // close this one to make room (0: none)
  };

  explicit Admission(AdmissionLimits limits);

  // A connection from `peer` arrived. When the verdict names one to
  // evict, that entry is already gone from the table: the caller closes
  // its socket.
  Verdict Arrive(const std::string& peer, Clock::time_point now);
  // The connection's state changed (kIdle after authenticating, kBusy
  // while a request runs, kIdle after it).
  void Set(Id id, ConnState state, Clock::time_point now);
  // The connection closed. Unknown ids (evicted ones) are ignored.
  void Remove(Id id);
  // Those past their deadline at `now`, taken out of the table: the
  // caller closes them.
  std::vector<Id> Expired(Clock::time_point now);

  size_t size() const { return conns_.size(); }
  size_t peer_count(const std::string& peer) const;
  size_t max_per_peer() const { return per_peer_; }
  const AdmissionLimits& limits() const { return limits_; }

 private:
  struct Entry {
    std::string peer;
    ConnState state = ConnState::kNew;
    Clock::time_point since;  // arrival for kNew, the last change otherwise
  };
  // The entry rules 1 and 2 would drop among `peer`'s ("" = everyone's).
  Id Victim(const std::string& peer) const;
  void Erase(Id id);

  AdmissionLimits limits_;
  size_t per_peer_;
  Id next_ = 1;
  std::map<Id, Entry> conns_;  // ids rise with arrival: oldest first
  std::map<std::string, size_t, std::less<>> peers_;
};

}  // namespace nodevol::net
