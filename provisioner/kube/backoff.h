// Backoff: the delay before retrying after a failure, doubling from an
// initial value to a cap, with jitter so that many clients that failed
// together do not retry together. Defaults are client-go reflector's
// (0.8 s doubling to 30 s). Not thread-safe; one per retry loop.
#pragma once

#include <chrono>
#include <algorithm>
#include <random>

namespace nodevol::kube {

class Backoff {
 public:
  using Duration = std::chrono::milliseconds;

  explicit Backoff(Duration initial = Duration(800), Duration cap = Duration(30000), double jitter = 0.5)
      : initial_(initial), cap_(cap), jitter_(jitter), rng_(std::random_device{}()) {}

  // The next delay: base * [1, 1 + jitter), base doubling from initial to
  // cap (the jittered value is capped too).
  Duration Next() {
    Duration base = next_;
    next_ = std::min(cap_, next_ * 2);
    std::uniform_real_distribution<double> d(1.0, 1.0 + jitter_);
    auto ms = static_cast<long long>(static_cast<double>(base.count()) * d(rng_));
    return std::min(cap_, Duration(ms));
  }
  // After a success: the next failure waits `initial` again.
  void Reset() { next_ = initial_; }

 private:
  Duration initial_, cap_;
  double jitter_;
  Duration next_ = initial_;
  std::mt19937_64 rng_;
};

}  // namespace nodevol::kube
