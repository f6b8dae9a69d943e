// Clock: the only source of time of the provisioner and the kube client,
// so that backoff, delayed queue items and lease expiry can be tested
// without sleeping.
//
// Now() is monotonic (durations, deadlines); WallNow() is calendar time for
// timestamps written to the API (Lease renewTime, event times). Code that
// waits for a deadline waits through WaitUntil, which a FakeClock ends when
// its time is advanced past the deadline.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

namespace nodevol {

class Clock {
 public:
  using Duration = std::chrono::steady_clock::duration;
  using TimePoint = std::chrono::steady_clock::time_point;
  using WallTime = std::chrono::system_clock::time_point;

  virtual ~Clock() = default;

  virtual TimePoint Now() const = 0;
  virtual WallTime WallNow() const = 0;

  // Blocks on `cv` (with `lock` held on entry and exit) until notified or
  // until Now() >= deadline. May return spuriously: callers re-check their
  // condition and the time in a loop, as with any condition variable.
  virtual void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                         TimePoint deadline) const = 0;

  // The process-wide real clock.
  static const Clock* Real();
};

// Time that moves only when a test says so. Thread-safe.
class FakeClock : public Clock {
 public:
  FakeClock();

  TimePoint Now() const override;
  WallTime WallNow() const override;
  void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 TimePoint deadline) const override;

  // Moves time forward and wakes every WaitUntil whose deadline has come.
  // Everything waiting must outlive the call.
  void Advance(Duration d);
  void SetWallNow(WallTime wall);

  // Number of threads blocked in WaitUntil on a deadline still in the
  // future; BlockUntilWaiters returns once at least `n` are (so a test
  // advances only after a worker has started its wait).
  int Waiters() const;
  void BlockUntilWaiters(int n) const;

 private:
  struct Waiter {
    uint64_t id;
    std::condition_variable* cv;
    std::mutex* mu;
    TimePoint deadline;
  };

  mutable std::mutex mu_;
  mutable std::condition_variable waiters_changed_;
  TimePoint now_;
  WallTime wall_at_start_;
  TimePoint start_;
  mutable std::vector<Waiter> waiters_;
  mutable uint64_t next_waiter_id_ = 0;
};

}  // namespace nodevol
