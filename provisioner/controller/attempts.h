// Attempts: which node a claim's CreateVolume was last sent to, as this
// process knows it: set before each create, and, for a process that has
// just started leading, read from the nodes themselves (SeedAttempts: the
// volumes pvc-<uid> there whose claim has no PV yet). A create whose
// outcome is unknown (DEADLINE_EXCEEDED, UNAVAILABLE, a lost PV save) may
// have made the volume there, so the claim stays with that node until it
// says the volume does not exist; such a claim also carries the node in its
// annotation nodevol.io/provisioning-node, for a node that cannot be read
// when the next leader starts.
//
// And whose PV this process saved, until the volume cache shows it: a
// claim queued again by our own annotation patch is then done at once,
// without asking the apiserver or the node again.
// Thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "base/backoff.h"

namespace nodevol::provisioner {

class Attempts {
 public:
  void Set(const std::string& claim_uid, const std::string& node) {
    std::lock_guard<std::mutex> lock(mu_);
    nodes_[claim_uid] = node;
  }
  // Set unless this process already knows an attempt for the claim.
  void SetIfAbsent(const std::string& claim_uid, const std::string& node) {
    std::lock_guard<std::mutex> lock(mu_);
    nodes_.emplace(claim_uid, node);
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

  // Nodes whose volumes SeedAttempts has read. seed_mu() is held while it
  // reads them, so that passes wait for a node's first read, not race it.
  // A node whose read failed is tried again kSeedRetry later, not by every
  // pass in between, and after each further failure twice as late, up to
  // kSeedRetryMax: every pass waits for a read in progress (up to its 5 s
  // page limit), so a node that keeps connections open and answers nothing
  // would otherwise stall the passes for every node half of the time
  // (k8s_provisioner_node_cutoff, answers dropped).
  static constexpr std::chrono::seconds kSeedRetry{10};
  static constexpr std::chrono::seconds kSeedRetryMax{300};
  std::mutex& seed_mu() { return seed_mu_; }
  bool Seeded(const std::string& node) const {
    std::lock_guard<std::mutex> lock(mu_);
    return seeded_.count(node) > 0;
  }
  bool SeedDue(const std::string& node, std::chrono::steady_clock::time_point now) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (seeded_.count(node)) return false;
    auto it = seed_failed_.find(node);
    return it == seed_failed_.end() ||
           now - it->second.at >= ExponentialDelay<std::chrono::steady_clock::duration>(
                                      it->second.failures - 1, kSeedRetry, kSeedRetryMax);
  }
  void SetSeeded(const std::string& node) {
    std::lock_guard<std::mutex> lock(mu_);
    seeded_.insert(node);
    seed_failed_.erase(node);
  }
  void SeedFailed(const std::string& node, std::chrono::steady_clock::time_point now) {
    std::lock_guard<std::mutex> lock(mu_);
    SeedFailure& f = seed_failed_[node];
    f.at = now;
    ++f.failures;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::string> nodes_;
  std::set<std::string> saved_;
  std::set<std::string> seeded_;
  struct SeedFailure {
    std::chrono::steady_clock::time_point at;  // the last one
    int failures = 0;                          // in a row
  };
  std::map<std::string, SeedFailure> seed_failed_;
  std::mutex seed_mu_;
};

}  // namespace nodevol::provisioner
