#include "queue/rate_limiter.h"

#include <algorithm>
#include <cmath>

#include "base/backoff.h"

namespace nodevol {

RateLimiter::RateLimiter(const Clock* clock, RateLimiterOptions options)
    : clock_(clock), options_(options), tokens_(options.burst), last_(clock->Now()) {}

Clock::Duration RateLimiter::When(const std::string& item) {
  std::lock_guard<std::mutex> guard(mu_);
  int& failures = failures_[item];
  Clock::Duration backoff = ExponentialDelay(failures, options_.base_delay, options_.max_delay);
  ++failures;
  if (options_.qps <= 0) return backoff;

  Clock::TimePoint now = clock_->Now();
  double elapsed = std::chrono::duration<double>(std::max(now - last_, Clock::Duration::zero())).count();
  tokens_ = std::min<double>(options_.burst, tokens_ + elapsed * options_.qps);
  last_ = std::max(now, last_);
  tokens_ -= 1;
  Clock::Duration bucket = Clock::Duration::zero();
  if (tokens_ < 0) {
    bucket = std::chrono::duration_cast<Clock::Duration>(std::chrono::duration<double>(-tokens_ / options_.qps));
  }
  return std::max(backoff, bucket);
}

void RateLimiter::Forget(const std::string& item) {
  std::lock_guard<std::mutex> guard(mu_);
  failures_.erase(item);
}

int RateLimiter::NumRequeues(const std::string& item) const {
  std::lock_guard<std::mutex> guard(mu_);
  auto it = failures_.find(item);
  return it == failures_.end() ? 0 : it->second;
}

}  // namespace nodevol
