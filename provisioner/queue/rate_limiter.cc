#include "queue/rate_limiter.h"

#include <algorithm>
#include <cmath>

namespace nodevol {

RateLimiter::RateLimiter(const Clock* clock, RateLimiterOptions options)
    : clock_(clock), options_(options), tokens_(options.burst), last_(clock->Now()) {}

Clock::Duration RateLimiter::Backoff(int failures) const {
  // base * 2^failures, computed in floating point so a long failure streak
  // saturates at the cap instead of overflowing.
  if (options_.base_delay <= Clock::Duration::zero()) return Clock::Duration::zero();
  double delay = static_cast<double>(options_.base_delay.count()) * std::exp2(failures);
  if (delay >= static_cast<double>(options_.max_delay.count())) return options_.max_delay;
  return Clock::Duration(static_cast<Clock::Duration::rep>(delay));
}

Clock::Duration RateLimiter::When(const std::string& item) {
  std::lock_guard<std::mutex> guard(mu_);
  int& failures = failures_[item];
  Clock::Duration backoff = Backoff(failures);
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
