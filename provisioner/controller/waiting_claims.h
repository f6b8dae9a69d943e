// WaitingClaims: claims whose last pass failed for want of room or of a
// reachable node, and when. A change in some node's capacity or
// reachability requeues only these, and each at most once per `min_gap`
// after its failure (its own backoff still runs): N pending claims do not
// cost N passes on every capacity report. Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/clock.h"

namespace nodevol::provisioner {

class WaitingClaims {
 public:
  explicit WaitingClaims(const Clock* clock = Clock::Real(), Clock::Duration min_gap = std::chrono::seconds(15))
      : clock_(clock), min_gap_(min_gap) {}

  void Add(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    since_[key] = clock_->Now();
  }
  void Remove(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    since_.erase(key);
  }
  // The keys that failed at least min_gap ago; they leave the set (a new
  // failure puts them back).
  std::vector<std::string> TakeDue() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> due;
    const Clock::TimePoint now = clock_->Now();
    for (auto it = since_.begin(); it != since_.end();) {
      if (now - it->second >= min_gap_) {
        due.push_back(it->first);
        it = since_.erase(it);
      } else {
        ++it;
      }
    }
    return due;
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return since_.size();
  }

 private:
  const Clock* const clock_;
  const Clock::Duration min_gap_;
  mutable std::mutex mu_;
  std::map<std::string, Clock::TimePoint> since_;
};

}  // namespace nodevol::provisioner
