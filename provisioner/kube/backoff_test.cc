#include "kube/backoff.h"

#include <gtest/gtest.h>

namespace nodevol::kube {
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

}  // namespace
}  // namespace nodevol::kube
