// The provisioner's one retry delay: `initial` doubling per failure up to
// `cap`, stretched by up to `jitter` (0.5: up to 50 % longer) so clients
// that failed together do not retry together, and capped again. Used by
// the informers (client-go reflector's 0.8 s → 30 s), the work queues'
// per-item backoff (client-go's 5 ms/15 s → 1000 s, no jitter) and node
// re-dials (1 s → 60 s, 20 %).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

namespace nodevol {

// initial * 2^failures * (1 + jitter * random01), never above cap; computed
// in floating point so a long failure streak saturates instead of
// overflowing. random01 in [0, 1).
template <typename Duration>
Duration ExponentialDelay(int failures, Duration initial, Duration cap, double jitter = 0, double random01 = 0) {
  if (initial <= Duration::zero()) return Duration::zero();
  double base = static_cast<double>(initial.count()) * std::exp2(std::max(failures, 0));
  double capped = std::min(base, static_cast<double>(cap.count()));
  double d = std::min(capped * (1.0 + jitter * random01), static_cast<double>(cap.count()));
  return Duration(static_cast<typename Duration::rep>(d));
}

// ExponentialDelay with its own failure count and random source, for one
// retry loop. Not thread-safe.
class Backoff {
 public:
  using Duration = std::chrono::milliseconds;

  explicit Backoff(Duration initial = Duration(800), Duration cap = Duration(30000), double jitter = 0.5)
      : initial_(initial), cap_(cap), jitter_(jitter), rng_(std::random_device{}()) {}

  // The delay after one more failure.
  Duration Next() {
    std::uniform_real_distribution<double> d(0.0, 1.0);
    Duration out = ExponentialDelay(failures_, initial_, cap_, jitter_, d(rng_));
    if (failures_ < 62) ++failures_;
    return out;
  }
  // After a success: the next failure waits `initial` again.
  void Reset() { failures_ = 0; }

 private:
  Duration initial_, cap_;
  double jitter_;
  int failures_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace nodevol
