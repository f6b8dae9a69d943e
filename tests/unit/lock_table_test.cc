#include "node/lock_table.h"

#include "base/call_scope.h"

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

namespace nodevol {
namespace {

// A second locker of a held key waits until the holder leaves: seen without
// timing, by the table's own count of waiters. A Lock() that did not wait
// lets the second locker in while the first still holds the key, every run.
TEST(LockTable, SecondLockerOfAHeldKeyWaitsForTheHolder) {
  LockTable t;
  std::atomic<bool> first_holds{true}, second_in{false}, second_saw_first{false};
  std::optional<LockTable::Guard> first;
  first.emplace(&t, "volume:a");
  std::thread second([&] {
    LockTable::Guard g(&t, "volume:a");
    second_saw_first = first_holds.load();
    second_in = true;
  });
  // Either the second locker is blocked in Lock (the correct case) or it
  // got in (the broken one); both end this loop without a clock.
  while (t.Waiting("volume:a") == 0 && !second_in) std::this_thread::yield();
  EXPECT_FALSE(second_in.load()) << "the second locker got the key while the first held it";
  first_holds = false;
  first.reset();
  second.join();
  EXPECT_TRUE(second_in.load());
  EXPECT_FALSE(second_saw_first.load()) << "the second locker was inside while the first held the key";
  EXPECT_EQ(t.Waiting("volume:a"), 0);
}

TEST(LockTable, SameKeyIsExclusiveOtherKeysAreNot) {
  LockTable t;
  std::atomic<int> inside{0}, max_inside{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      for (int j = 0; j < 200; ++j) {
        LockTable::Guard g(&t, "volume:a");
        int n = ++inside;
        max_inside = std::max(max_inside.load(), n);
        --inside;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(max_inside.load(), 1);

  // Holding one key does not block another.
  LockTable::Guard a(&t, "volume:a");
  std::thread other([&] { LockTable::Guard b(&t, "volume:b"); });
  other.join();
}

// issue 59 item 1: kubelet's retries of a publish stuck on a hung disk each
// parked a thread behind the stuck one for ever. A wait now ends at the
// caller's deadline, says who holds the key, and leaves the key as it was.
TEST(LockTable, AWaitEndsAtTheCallersDeadlineNamingTheHolder) {
  LockTable t;
  std::optional<LockTable::Guard> stuck;
  {
    CallScope call(CallScope::Clock::time_point::max(), "Publish");
    stuck.emplace(&t, "volume a");
    ASSERT_TRUE(stuck->status().ok());
  }
  std::vector<std::thread> retries;
  std::atomic<int> refused{0};
  for (int i = 0; i < 16; ++i) {
    retries.emplace_back([&] {
      CallScope call(CallScope::Clock::now() + std::chrono::milliseconds(200), "Publish");
      LockTable::Guard g(&t, "volume a");
      if (g.status().code() == Status::Code::kDeadlineExceeded &&
          g.status().message().find("volume a is busy: a Publish call has held it") != std::string::npos)
        ++refused;
    });
  }
  for (auto& th : retries) th.join();  // a wait that ignored the deadline never ends here
  EXPECT_EQ(refused.load(), 16);
  EXPECT_EQ(t.Waiting("volume a"), 0);
  stuck.reset();
  // The key is free, and nothing the refused waits did is left over.
  CallScope call(CallScope::Clock::now(), "Publish");
  LockTable::Guard g(&t, "volume a");
  EXPECT_TRUE(g.status().ok()) << g.status().message();
}

TEST(LockTable, NoCallerNoDeadlineAndAnInnerScopeKeepsTheSoonerOne) {
  EXPECT_EQ(CallScope::Deadline(), CallScope::Clock::time_point::max());
  EXPECT_EQ(CallScope::SteadyDeadline(), std::chrono::steady_clock::time_point::max());
  auto soon = CallScope::Clock::now() + std::chrono::seconds(1);
  CallScope outer(soon, "csi.NodePublishVolume");
  {
    CallScope inner(CallScope::Clock::time_point::max(), "Publish");
    EXPECT_EQ(CallScope::Deadline(), soon);
    EXPECT_EQ(CallScope::What(), "Publish");
  }
  EXPECT_EQ(CallScope::What(), "csi.NodePublishVolume");
  CallScope past(CallScope::Clock::now() - std::chrono::seconds(5), "Publish");
  auto passed = CallScope::SteadyDeadline();
  EXPECT_LE(passed, std::chrono::steady_clock::now()) << "a deadline in the past is now, not later";
}

}  // namespace
}  // namespace nodevol
