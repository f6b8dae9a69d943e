// Reservations: bytes promised to volumes being created, per node and pool,
// so two claims racing for a node's last bytes do not both land there. A
// reservation is made under the same lock as the placement decision
// (TryReserve), and outlives the CreateVolume call by `linger` after Done,
// long enough for nodevold's next capacity report to include the new
// volume (reports come every poll interval, 2 s by default).
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace nodevol::provisioner {

class Reservations {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Reservations(std::chrono::milliseconds linger = std::chrono::seconds(10)) : linger_(linger) {}

  // Bytes reserved on node/pool now (expired lingering ones dropped).
  uint64_t Reserved(const std::string& node, const std::string& pool, Clock::time_point now = Clock::now()) const;

  // Records `bytes` for claim `key` on node/pool (replacing an earlier
  // reservation of the same key).
  void Reserve(const std::string& key, const std::string& node, const std::string& pool, uint64_t bytes);

  // The create finished (either way): ok = keep counting the bytes for
  // `linger` (the node's next report will), !ok = drop now.
  void Done(const std::string& key, bool ok, Clock::time_point now = Clock::now());

  // The mutex placement holds while it decides and reserves.
  std::mutex& mu() { return decide_mu_; }

 private:
  struct Entry {
    std::string node, pool;
    uint64_t bytes = 0;
    bool done = false;
    Clock::time_point expires;
  };
  std::chrono::milliseconds linger_;
  mutable std::mutex mu_;
  std::mutex decide_mu_;
  mutable std::map<std::string, Entry> entries_;
};

}  // namespace nodevol::provisioner
