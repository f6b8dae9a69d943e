// NodeLoad: CreateVolume calls in flight per node, at most `limit` each.
// A node slow to answer (a loaded disk, a hung nodevold until the call's
// 60 s deadline) then holds at most `limit` of the claim workers: claims
// that may go elsewhere are placed elsewhere, and claims that must go
// there wait outside the workers (Outcome kLater), so claims bound for
// other nodes keep moving. Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>

namespace nodevol::provisioner {

class NodeLoad {
 public:
  explicit NodeLoad(int limit) : limit_(limit < 1 ? 1 : limit) {}

  // Nodes with `limit` calls in flight.
  std::set<std::string> Busy() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::set<std::string> out;
    for (const auto& [node, n] : calls_)
      if (n >= limit_) out.insert(node);
    return out;
  }
  // Takes a call slot on `node`; false when it has `limit` already.
  bool TryAcquire(const std::string& node) {
    std::lock_guard<std::mutex> lock(mu_);
    int& n = calls_[node];
    if (n >= limit_) return false;
    ++n;
    return true;
  }
  void Release(const std::string& node) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = calls_.find(node); it != calls_.end() && --it->second <= 0) calls_.erase(it);
  }

 private:
  const int limit_;
  mutable std::mutex mu_;
  std::map<std::string, int> calls_;
};

}  // namespace nodevol::provisioner
