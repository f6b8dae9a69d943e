#include "placement/reservations.h"

namespace nodevol::provisioner {

uint64_t Reservations::Reserved(const std::string& node, const std::string& pool, Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t sum = 0;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.done && now >= it->second.expires) {
      it = entries_.erase(it);
      continue;
    }
    if (it->second.node == node && it->second.pool == pool) sum += it->second.bytes;
    ++it;
  }
  return sum;
}

void Reservations::Reserve(const std::string& key, const std::string& node, const std::string& pool,
                           uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_[key] = Entry{node, pool, bytes, false, {}};
}

void Reservations::Done(const std::string& key, bool ok, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  if (!ok) {
    entries_.erase(it);
    return;
  }
  it->second.done = true;
  it->second.expires = now + linger_;
}

}  // namespace nodevol::provisioner
