// Attempts: which node a claim's CreateVolume was last sent to, for this
// process (the claim's annotation nodevol.io/provisioning-node says the
// same across restarts and failovers; this covers the informer's lag after
// our own patch). A create whose outcome is unknown (DEADLINE_EXCEEDED,
// UNAVAILABLE, a lost PV save) may have made the volume there, so the claim
// stays with that node until it says the volume does not exist.
//
// And whose PV this process saved, until the volume cache shows it: a
// claim queued again by our own annotation patch is then done at once,
// without asking the apiserver or the node again.
// Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>

namespace nodevol::provisioner {

class Attempts {
 public:
  void Set(const std::string& claim_uid, const std::string& node) {
    std::lock_guard<std::mutex> lock(mu_);
    nodes_[claim_uid] = node;
  }
  std::string Get(const std::string& claim_uid) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = nodes_.find(claim_uid);
    return it == nodes_.end() ? "" : it->second;
  }
  // The claim's PV is saved: the attempt is over.
  void Saved(const std::string& claim_uid) {
    std::lock_guard<std::mutex> lock(mu_);
    nodes_.erase(claim_uid);
    saved_.insert(claim_uid);
  }
  bool WasSaved(const std::string& claim_uid) const {
    std::lock_guard<std::mutex> lock(mu_);
    return saved_.count(claim_uid) > 0;
  }
  // The claim is gone, or its PV is in the cache.
  void Forget(const std::string& claim_uid) {
    std::lock_guard<std::mutex> lock(mu_);
    nodes_.erase(claim_uid);
    saved_.erase(claim_uid);
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::string> nodes_;
  std::set<std::string> saved_;
};

}  // namespace nodevol::provisioner
