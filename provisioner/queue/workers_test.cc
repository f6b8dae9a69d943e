#include "queue/workers.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>

namespace nodevol {
namespace {

using std::chrono::seconds;
using Outcome = Workers::Outcome;

TEST(WorkersTest, DoneForgetsTheBackoff) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.AddRateLimited("a");
  clock.Advance(seconds(15));
  ASSERT_EQ(q.NumRequeues("a"), 1);
  EXPECT_TRUE(Workers::ProcessNext("test", &q, 15, [](const std::string&) { return Outcome::kDone; }));
  EXPECT_EQ(q.NumRequeues("a"), 0);
  EXPECT_EQ(q.Len(), 0u);
}

TEST(WorkersTest, RetriesWithBackoffThenGivesUpUntilTheObjectChanges) {
  FakeClock clock;
  WorkQueue q(&clock);
  int attempts = 0;
  auto fail = [&](const std::string&) {
    ++attempts;
    return Outcome::kRetry;
  };
  q.Add("a");
  // max_failures 3: the first try and three retries, at 15 s, 30 s, 60 s.
  ASSERT_TRUE(Workers::ProcessNext("test", &q, 3, fail));
  for (int delay : {15, 30, 60}) {
    clock.Advance(seconds(delay - 1));
    ASSERT_EQ(q.Len(), 0u) << delay;
    clock.Advance(seconds(1));
    ASSERT_EQ(q.Len(), 1u) << delay;
    ASSERT_TRUE(Workers::ProcessNext("test", &q, 3, fail));
  }
  EXPECT_EQ(attempts, 4);
  clock.Advance(seconds(10000));
  EXPECT_EQ(q.Len(), 0u);  // given up
  EXPECT_EQ(q.NumRequeues("a"), 3);  // not forgotten

  // The object changes (an informer adds it): one more try, and since the
  // failures are still counted, no retry after it.
  q.Add("a");
  ASSERT_TRUE(Workers::ProcessNext("test", &q, 3, fail));
  EXPECT_EQ(attempts, 5);
  clock.Advance(seconds(10000));
  EXPECT_EQ(q.Len(), 0u);
}

TEST(WorkersTest, ZeroMaxFailuresRetriesForever) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.Add("a");
  for (int i = 0; i < 30; ++i) {
    clock.Advance(seconds(1000));
    ASSERT_EQ(q.Len(), 1u) << i;
    ASSERT_TRUE(Workers::ProcessNext("test", &q, 0, [](const std::string&) { return Outcome::kRetry; }));
  }
}

TEST(WorkersTest, GiveUpDropsAtOnce) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.Add("a");
  ASSERT_TRUE(Workers::ProcessNext("test", &q, 15, [](const std::string&) { return Outcome::kGiveUp; }));
  clock.Advance(seconds(10000));
  EXPECT_EQ(q.Len(), 0u);
  EXPECT_EQ(q.NumRequeues("a"), 0);
}

TEST(WorkersTest, ExceptionCountsAsRetry) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.Add("a");
  ASSERT_TRUE(Workers::ProcessNext("test", &q, 15, [](const std::string&) -> Outcome {
    throw std::runtime_error("boom");
  }));
  EXPECT_EQ(q.NumRequeues("a"), 1);
  clock.Advance(seconds(15));
  EXPECT_EQ(q.Len(), 1u);
}

TEST(WorkersTest, ProcessNextReturnsFalseAfterShutDown) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.ShutDown();
  EXPECT_FALSE(Workers::ProcessNext("test", &q, 15, [](const std::string&) { return Outcome::kDone; }));
}

TEST(WorkersTest, ThreadsProcessEveryKeyAndStopOnDestruction) {
  WorkQueue q;
  std::mutex mu;
  std::condition_variable cv;
  std::set<std::string> done;
  {
    Workers workers("test", &q, 4, 15, [&](const std::string& key) {
      std::lock_guard<std::mutex> guard(mu);
      done.insert(key);
      cv.notify_all();
      return Outcome::kDone;
    });
    for (int i = 0; i < 100; ++i) q.Add("k" + std::to_string(i));
    std::unique_lock<std::mutex> lock(mu);
    // The bound only keeps a bug from hanging the suite.
    EXPECT_TRUE(cv.wait_for(lock, seconds(60), [&] { return done.size() == 100; }));
  }  // ~Workers shuts the queue down and joins
  EXPECT_TRUE(q.ShuttingDown());
}

}  // namespace
}  // namespace nodevol
