#include "base/backoff.h"

#include <gtest/gtest.h>

namespace nodevol {
namespace {

using ms = std::chrono::milliseconds;

TEST(Backoff, DoublesWithJitterUpToCapAndResets) {
  Backoff b(ms(800), ms(30000), 0.5);
  ms base(800);
  for (int i = 0; i < 10; ++i) {
    ms d = b.Next();
    EXPECT_GE(d, std::min(base, ms(30000))) << i;
    EXPECT_LE(d, std::min(ms(static_cast<long>(base.count() * 1.5)), ms(30000))) << i;
    base = std::min(base * 2, ms(30000));
  }
  EXPECT_EQ(b.Next() >= ms(30000), true);  // stays at the cap
  b.Reset();
  EXPECT_LE(b.Next(), ms(1200));
}

// The per-item delays of client-go's work queue and the node re-dials
// (the registry's former RedialDelay), from the same function.
TEST(ExponentialDelay, DoublesFromInitialToCapWithJitterNeverPastIt) {
  using namespace std::chrono_literals;
  std::vector<long> base;
  for (int f = 0; f < 9; ++f) base.push_back(ExponentialDelay<ms>(f, 1s, 60s, 0.2, 0.0).count());
  EXPECT_EQ(base, (std::vector<long>{1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000, 60000}));
  EXPECT_EQ(ExponentialDelay<ms>(0, 1s, 60s, 0.2, 0.999).count(), 1199);
  EXPECT_EQ(ExponentialDelay<ms>(5, 1s, 60s, 0.2, 0.5).count(), 35200);
  EXPECT_EQ(ExponentialDelay<ms>(6, 1s, 60s, 0.2, 0.999).count(), 60000) << "jitter never passes the cap";
  EXPECT_EQ(ExponentialDelay<ms>(100000, 1s, 60s).count(), 60000) << "no overflow";
  EXPECT_EQ(ExponentialDelay<std::chrono::nanoseconds>(3, 5ms, 1000s).count(), 40'000'000);
  EXPECT_EQ(ExponentialDelay<ms>(3, 0ms, 1000s).count(), 0);
}

}  // namespace
}  // namespace nodevol
