#include "node/lock_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace nodevol {
namespace {

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

}  // namespace
}  // namespace nodevol
