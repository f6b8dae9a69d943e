#include "queue/work_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace nodevol {
namespace {

using std::chrono::seconds;

std::string MustGet(WorkQueue& q) {
  std::string key;
  EXPECT_TRUE(q.Get(&key));
  return key;
}

TEST(WorkQueueTest, FifoAndDedupeWhileWaiting) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.Add("a");
  q.Add("b");
  q.Add("a");
  EXPECT_EQ(q.Len(), 2u);
  EXPECT_EQ(MustGet(q), "a");
  EXPECT_EQ(MustGet(q), "b");
  EXPECT_EQ(q.Len(), 0u);
}

TEST(WorkQueueTest, KeyBeingProcessedIsRequeuedOnlyAtDone) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.Add("a");
  EXPECT_EQ(MustGet(q), "a");
  q.Add("a");
  q.Add("a");
  // Not handed out again while a worker holds it.
  EXPECT_EQ(q.Len(), 0u);
  q.Done("a");
  EXPECT_EQ(q.Len(), 1u);
  EXPECT_EQ(MustGet(q), "a");
  q.Done("a");
  // Done without a re-add: gone.
  EXPECT_EQ(q.Len(), 0u);
}

TEST(WorkQueueTest, AddAfterWaitsForTheClock) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.AddAfter("a", seconds(10));
  EXPECT_EQ(q.Len(), 0u);
  clock.Advance(seconds(9));
  EXPECT_EQ(q.Len(), 0u);
  clock.Advance(seconds(1));
  EXPECT_EQ(q.Len(), 1u);
  EXPECT_EQ(MustGet(q), "a");
}

TEST(WorkQueueTest, AddAfterKeepsTheEarlierTime) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.AddAfter("a", seconds(10));
  q.AddAfter("a", seconds(5));   // sooner: wins
  q.AddAfter("a", seconds(20));  // later: ignored
  clock.Advance(seconds(5));
  EXPECT_EQ(q.Len(), 1u);
  EXPECT_EQ(MustGet(q), "a");
  q.Done("a");
  clock.Advance(seconds(30));
  EXPECT_EQ(q.Len(), 0u);  // held once, handed out once
}

TEST(WorkQueueTest, AddAfterZeroIsAdd) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.AddAfter("a", seconds(0));
  EXPECT_EQ(q.Len(), 1u);
}

TEST(WorkQueueTest, DelayedKeysComeOutInTimeOrder) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.AddAfter("late", seconds(3));
  q.AddAfter("early", seconds(1));
  q.AddAfter("middle", seconds(2));
  clock.Advance(seconds(3));
  EXPECT_EQ(MustGet(q), "early");
  EXPECT_EQ(MustGet(q), "middle");
  EXPECT_EQ(MustGet(q), "late");
}

TEST(WorkQueueTest, BlockedGetWakesWhenTheDelayPasses) {
  FakeClock clock;
  WorkQueue q(&clock);
  std::string got;
  std::thread getter([&] { got = MustGet(q); });
  q.AddAfter("a", seconds(5));
  clock.BlockUntilWaiters(1);  // the getter sleeps towards the 5 s deadline
  clock.Advance(seconds(5));
  getter.join();
  EXPECT_EQ(got, "a");
}

TEST(WorkQueueTest, EarlierDelayedKeyShortensASleepingGet) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.AddAfter("late", seconds(100));
  std::string got;
  std::thread getter([&] { got = MustGet(q); });
  clock.BlockUntilWaiters(1);
  q.AddAfter("soon", seconds(1));
  // The getter is woken and re-arms for the earlier deadline; whichever
  // happens first, the wake-up or the advance, it then finds "soon" ready.
  clock.Advance(seconds(1));
  getter.join();
  EXPECT_EQ(got, "soon");
}

TEST(WorkQueueTest, RateLimitedAddsBackOffAndForgetResets) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.AddRateLimited("a");
  EXPECT_EQ(q.NumRequeues("a"), 1);
  clock.Advance(seconds(14));
  EXPECT_EQ(q.Len(), 0u);
  clock.Advance(seconds(1));
  EXPECT_EQ(MustGet(q), "a");
  q.AddRateLimited("a");  // second failure: 30 s
  q.Done("a");
  clock.Advance(seconds(29));
  EXPECT_EQ(q.Len(), 0u);
  clock.Advance(seconds(1));
  EXPECT_EQ(MustGet(q), "a");
  q.Forget("a");
  q.Done("a");
  EXPECT_EQ(q.NumRequeues("a"), 0);
  q.AddRateLimited("a");
  clock.Advance(seconds(15));
  EXPECT_EQ(q.Len(), 1u);
}

// Issue 26 item 1: a stopping controller (lost lease, SIGTERM) must not
// start work it has not begun: queued keys are dropped, not handed out.
TEST(WorkQueueTest, ShutDownDropsWhatIsQueued) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.Add("a");
  q.AddAfter("delayed", seconds(1));
  q.ShutDown();
  EXPECT_TRUE(q.ShuttingDown());
  q.Add("b");  // ignored
  EXPECT_EQ(q.Len(), 0u);
  clock.Advance(seconds(5));
  std::string key;
  EXPECT_FALSE(q.Get(&key));  // "a" and "delayed" were dropped, "b" never entered
}

// A key being processed at shutdown is finished (Done) but not requeued.
TEST(WorkQueueTest, ShutDownDoesNotRequeueAKeyAddedWhileProcessing) {
  FakeClock clock;
  WorkQueue q(&clock);
  q.Add("a");
  EXPECT_EQ(MustGet(q), "a");
  q.Add("a");  // would be handed out again at Done
  q.ShutDown();
  q.Done("a");
  std::string key;
  EXPECT_FALSE(q.Get(&key));
}

TEST(WorkQueueTest, ShutDownWakesEveryBlockedGet) {
  WorkQueue q;  // real clock: nothing here depends on time
  std::atomic<int> returned_false{0};
  std::vector<std::thread> getters;
  for (int i = 0; i < 4; ++i) {
    getters.emplace_back([&] {
      std::string key;
      if (!q.Get(&key)) ++returned_false;
    });
  }
  q.ShutDown();
  for (std::thread& t : getters) t.join();
  EXPECT_EQ(returned_false.load(), 4);
}

TEST(WorkQueueTest, ShutDownWithDrainWaitsForDone) {
  WorkQueue q;
  q.Add("a");
  EXPECT_EQ(MustGet(q), "a");
  std::atomic<bool> drained{false};
  std::thread drainer([&] {
    q.ShutDownWithDrain();
    drained = true;
  });
  // The drainer cannot finish while "a" is out (this can only fail, never
  // flake into a pass, if draining were broken and the drainer quick).
  while (!q.ShuttingDown()) std::this_thread::yield();
  EXPECT_FALSE(drained.load());
  q.Done("a");
  drainer.join();
  EXPECT_TRUE(drained.load());
}

// Many threads, keys re-added while being processed: no key is ever in two
// workers at once, and every key added is processed after its last add.
TEST(WorkQueueTest, ConcurrentWorkersNeverShareAKey) {
  WorkQueue q;
  constexpr int kKeys = 20;
  constexpr int kRounds = 200;
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, int> in_flight;
  std::map<std::string, int> adds_seen;  // adds made before the latest start
  std::map<std::string, int> adds;
  bool overlap = false;

  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      std::string key;
      while (q.Get(&key)) {
        {
          std::lock_guard<std::mutex> guard(mu);
          if (++in_flight[key] > 1) overlap = true;
          adds_seen[key] = adds[key];
        }
        // Stay in flight a little so re-adds land while the key is held.
        for (int i = 0; i < 50; ++i) std::this_thread::yield();
        {
          std::lock_guard<std::mutex> guard(mu);
          --in_flight[key];
          cv.notify_all();
        }
        q.Done(key);
      }
    });
  }
  for (int r = 0; r < kRounds; ++r) {
    for (int k = 0; k < kKeys; ++k) {
      std::string key = "k" + std::to_string(k);
      {
        std::lock_guard<std::mutex> guard(mu);
        ++adds[key];
      }
      q.Add(key);
    }
  }
  {
    // Every key's last add must be followed by a processing that saw it.
    // The bound only keeps a lost key from hanging the suite.
    std::unique_lock<std::mutex> lock(mu);
    bool all_seen = cv.wait_for(lock, std::chrono::seconds(60), [&] {
      for (const auto& [key, n] : adds) {
        if (adds_seen[key] != n || in_flight[key] != 0) return false;
      }
      return true;
    });
    EXPECT_TRUE(all_seen) << "an add was lost";
  }
  q.ShutDown();
  for (std::thread& t : workers) t.join();
  EXPECT_FALSE(overlap);
  EXPECT_EQ(q.Len(), 0u);
}

}  // namespace
}  // namespace nodevol
