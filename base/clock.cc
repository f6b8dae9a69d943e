#include "base/clock.h"

#include <algorithm>

namespace nodevol {
namespace {

class RealClock : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  WallTime WallNow() const override { return std::chrono::system_clock::now(); }
  void WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                 TimePoint deadline) const override {
    cv.wait_until(lock, deadline);
  }
};

}  // namespace

const Clock* Clock::Real() {
  static const RealClock clock;
  return &clock;
}

// An arbitrary but fixed start, far from the epoch so that "now - 1 hour"
// is still a valid time point; the wall clock starts at 2026-01-01T00:00:00Z.
FakeClock::FakeClock()
    : now_(TimePoint(std::chrono::hours(1000))),
      wall_at_start_(WallTime(std::chrono::seconds(1767225600))),
      start_(now_) {}

Clock::TimePoint FakeClock::Now() const {
  std::lock_guard<std::mutex> guard(mu_);
  return now_;
}

Clock::WallTime FakeClock::WallNow() const {
  std::lock_guard<std::mutex> guard(mu_);
  return wall_at_start_ + std::chrono::duration_cast<WallTime::duration>(now_ - start_);
}

void FakeClock::SetWallNow(WallTime wall) {
  std::lock_guard<std::mutex> guard(mu_);
  wall_at_start_ = wall - std::chrono::duration_cast<WallTime::duration>(now_ - start_);
}

void FakeClock::WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                          TimePoint deadline) const {
  uint64_t id;
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (now_ >= deadline) return;
    id = next_waiter_id_++;
    waiters_.push_back({id, &cv, lock.mutex(), deadline});
    waiters_changed_.notify_all();
  }
  // The caller's mutex is held from before registration until cv.wait
  // releases it, and Advance takes that mutex before notifying: a wake-up
  // for this deadline cannot fall between the two.
  cv.wait(lock);
  std::lock_guard<std::mutex> guard(mu_);
  std::erase_if(waiters_, [id](const Waiter& w) { return w.id == id; });
  waiters_changed_.notify_all();
}

void FakeClock::Advance(Duration d) {
  std::vector<Waiter> due;
  {
    std::lock_guard<std::mutex> guard(mu_);
    now_ += d;
    // Due waiters leave the list now, not when they wake, so Waiters()
    // counts only threads still waiting for a future time.
    std::erase_if(waiters_, [&](const Waiter& w) {
      if (w.deadline > now_) return false;
      due.push_back(w);
      return true;
    });
    waiters_changed_.notify_all();
  }
  for (const Waiter& w : due) {
    std::lock_guard<std::mutex> guard(*w.mu);
    w.cv->notify_all();
  }
}

int FakeClock::Waiters() const {
  std::lock_guard<std::mutex> guard(mu_);
  return static_cast<int>(waiters_.size());
}

void FakeClock::BlockUntilWaiters(int n) const {
  std::unique_lock<std::mutex> lock(mu_);
  waiters_changed_.wait(lock, [&] { return static_cast<int>(waiters_.size()) >= n; });
}

}  // namespace nodevol
