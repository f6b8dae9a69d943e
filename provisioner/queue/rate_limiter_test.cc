#include "queue/rate_limiter.h"

#include <gtest/gtest.h>

#include <string>

namespace nodevol {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(RateLimiterTest, ExponentialPerItemBackoffCappedAt1000Seconds) {
  FakeClock clock;
  RateLimiter limiter(&clock);
  const int expected[] = {15, 30, 60, 120, 240, 480, 960, 1000, 1000};
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(limiter.NumRequeues("a"), i);
    EXPECT_EQ(limiter.When("a"), seconds(expected[i])) << "failure " << i;
  }
  // Long streaks saturate instead of overflowing.
  for (int i = 0; i < 2000; ++i) limiter.When("a");
  EXPECT_EQ(limiter.When("a"), seconds(1000));
}

TEST(RateLimiterTest, ItemsAreIndependentAndForgetResets) {
  FakeClock clock;
  RateLimiter limiter(&clock);
  limiter.When("a");
  limiter.When("a");
  EXPECT_EQ(limiter.When("b"), seconds(15));
  EXPECT_EQ(limiter.NumRequeues("a"), 2);
  limiter.Forget("a");
  EXPECT_EQ(limiter.NumRequeues("a"), 0);
  EXPECT_EQ(limiter.When("a"), seconds(15));
  EXPECT_EQ(limiter.NumRequeues("b"), 1);
}

TEST(RateLimiterTest, TokenBucketAllowsBurstThenQps) {
  FakeClock clock;
  // A negligible per-item backoff to see the bucket alone.
  RateLimiter limiter(&clock, {.base_delay = milliseconds(1), .max_delay = milliseconds(1), .qps = 10, .burst = 100});
  for (int i = 0; i < 100; ++i) EXPECT_EQ(limiter.When("item" + std::to_string(i)), milliseconds(1)) << i;
  EXPECT_EQ(limiter.When("x1"), milliseconds(100));
  EXPECT_EQ(limiter.When("x2"), milliseconds(200));
  EXPECT_EQ(limiter.When("x3"), milliseconds(300));
  // One second refills 10 tokens; three were owed.
  clock.Advance(seconds(1));
  for (int i = 0; i < 7; ++i) EXPECT_EQ(limiter.When("y" + std::to_string(i)), milliseconds(1)) << i;
  EXPECT_EQ(limiter.When("y7"), milliseconds(100));
  // A long pause refills to the burst, not beyond.
  clock.Advance(seconds(3600));
  for (int i = 0; i < 100; ++i) limiter.When("z" + std::to_string(i));
  EXPECT_EQ(limiter.When("z100"), milliseconds(100));
}

TEST(RateLimiterTest, DefaultsTakeTheLargerOfBackoffAndBucket) {
  FakeClock clock;
  RateLimiter limiter(&clock);
  // 250 distinct failing items at once: the 251st owes 151 tokens = 15.1 s,
  // more than its 15 s first backoff.
  for (int i = 0; i < 250; ++i) EXPECT_EQ(limiter.When("i" + std::to_string(i)), seconds(15)) << i;
  EXPECT_EQ(limiter.When("i250"), milliseconds(15100));
}

TEST(RateLimiterTest, BucketCanBeDisabled) {
  FakeClock clock;
  RateLimiter limiter(&clock, {.base_delay = milliseconds(0), .max_delay = milliseconds(0), .qps = 0, .burst = 0});
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(limiter.When("a"), milliseconds(0));
}

}  // namespace
}  // namespace nodevol
