// RateLimiter: how long a failed work item waits before its next try, as
// client-go's DefaultControllerRateLimiter (the reference provisioner's):
// the larger of a per-item exponential backoff (base delay doubling per
// failure up to a cap; 15 s → 1000 s by default) and an overall token bucket
// (10 qps, burst 100) that keeps a storm of failures from hammering the
// apiserver. Thread-safe.
#pragma once

#include <mutex>
#include <string>
#include <unordered_map>

#include "base/clock.h"

namespace nodevol {

struct RateLimiterOptions {
  Clock::Duration base_delay = std::chrono::seconds(15);
  Clock::Duration max_delay = std::chrono::seconds(1000);
  double qps = 10;  // <= 0: no token bucket
  int burst = 100;
};

class RateLimiter {
 public:
  explicit RateLimiter(const Clock* clock, RateLimiterOptions options = {});

  // Records one more failure of `item` and returns how long it should wait.
  Clock::Duration When(const std::string& item);
  // Forgets `item`'s failures (it succeeded or is gone); the bucket's tokens
  // are shared and are not given back.
  void Forget(const std::string& item);
  // Failures of `item` recorded since it was last forgotten.
  int NumRequeues(const std::string& item) const;

 private:
  const Clock* const clock_;
  const RateLimiterOptions options_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, int> failures_;
  // Token bucket as golang.org/x/time/rate reserves: tokens may go negative,
  // each reservation waits until its token would exist.
  double tokens_;
  Clock::TimePoint last_;
};

}  // namespace nodevol
