#include "base/clock.h"

#include <gtest/gtest.h>

#include <thread>

namespace nodevol {
namespace {

using std::chrono::seconds;

TEST(FakeClockTest, MovesOnlyWhenAdvanced) {
  FakeClock clock;
  Clock::TimePoint t0 = clock.Now();
  Clock::WallTime w0 = clock.WallNow();
  EXPECT_EQ(clock.Now(), t0);
  clock.Advance(seconds(5));
  EXPECT_EQ(clock.Now() - t0, seconds(5));
  EXPECT_EQ(clock.WallNow() - w0, seconds(5));
}

TEST(FakeClockTest, WallTimeCanBeSetWithoutMovingMonotonicTime) {
  FakeClock clock;
  Clock::TimePoint t0 = clock.Now();
  Clock::WallTime wall(seconds(2000000000));
  clock.SetWallNow(wall);
  EXPECT_EQ(clock.WallNow(), wall);
  EXPECT_EQ(clock.Now(), t0);
  clock.Advance(seconds(1));
  EXPECT_EQ(clock.WallNow(), wall + seconds(1));
}

TEST(FakeClockTest, WaitUntilPastDeadlineReturnsAtOnce) {
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock<std::mutex> lock(mu);
  clock.WaitUntil(cv, lock, clock.Now());
  EXPECT_TRUE(lock.owns_lock());
  EXPECT_EQ(clock.Waiters(), 0);
}

TEST(FakeClockTest, AdvanceWakesOnlyDueWaiters) {
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  const Clock::TimePoint deadline = clock.Now() + seconds(10);
  bool woke = false;
  std::thread waiter([&] {
    std::unique_lock<std::mutex> lock(mu);
    while (clock.Now() < deadline) clock.WaitUntil(cv, lock, deadline);
    woke = true;
  });
  clock.BlockUntilWaiters(1);
  clock.Advance(seconds(9));
  // Not due: still registered (a due waiter is removed by Advance itself).
  EXPECT_EQ(clock.Waiters(), 1);
  clock.Advance(seconds(1));
  waiter.join();
  EXPECT_TRUE(woke);
  EXPECT_EQ(clock.Waiters(), 0);
}

TEST(RealClockTest, IsMonotonicAndNearSystemTime) {
  const Clock* clock = Clock::Real();
  Clock::TimePoint a = clock->Now();
  Clock::TimePoint b = clock->Now();
  EXPECT_LE(a, b);
  EXPECT_LT(std::chrono::abs(clock->WallNow() - std::chrono::system_clock::now()), seconds(5));
}

}  // namespace
}  // namespace nodevol
