// GivenUp and WaitingClaims: what decides whether a claim is queued again
// (issue 26 item 6).
#include "controller/given_up.h"

#include <gtest/gtest.h>

#include "controller/waiting_claims.h"

namespace nodevol::provisioner {
namespace {

TEST(GivenUp, AResyncDoesNotRequeueAGivenUpClaimAChangeDoes) {
  GivenUp g;
  EXPECT_TRUE(g.ShouldQueue("app/a", "5"));
  g.Add("app/a", "5");
  EXPECT_FALSE(g.ShouldQueue("app/a", "5"));  // resync: same version
  EXPECT_FALSE(g.ShouldQueue("app/a", "5"));
  EXPECT_TRUE(g.ShouldQueue("app/a", "6"));  // the claim changed
  EXPECT_TRUE(g.ShouldQueue("app/a", "6"));
  g.Add("app/b", "1");
  g.Clear();  // a class changed
  EXPECT_TRUE(g.ShouldQueue("app/b", "1"));
}

TEST(WaitingClaims, EachIsRequeuedAtMostOncePerGapAfterItsFailure) {
  FakeClock clock;
  WaitingClaims w(&clock, std::chrono::seconds(15));
  w.Add("app/a");
  EXPECT_TRUE(w.TakeDue().empty());  // capacity changed at once: not yet
  clock.Advance(std::chrono::seconds(15));
  w.Add("app/b");
  EXPECT_EQ(w.TakeDue(), std::vector<std::string>{"app/a"});
  EXPECT_TRUE(w.TakeDue().empty());  // taken: back only after a new failure
  clock.Advance(std::chrono::seconds(15));
  EXPECT_EQ(w.TakeDue(), std::vector<std::string>{"app/b"});
}

}  // namespace
}  // namespace nodevol::provisioner
