#include "controller/pod_claims.h"

#include <gtest/gtest.h>

#include "controller/fakes_test.h"
#include "base/size.h"

namespace nodevol::provisioner {
namespace {

using testing::Claim;
using testing::Class;
using testing::World;
using nlohmann::json;
using Kind = CapacityLedger::Kind;

using testing::WaitingClass;

// A waiting claim as the apiserver holds it before the scheduler picks a
// node: no storage-provisioner annotation yet.
json Waiting(const std::string& uid, const std::string& selected = "") {
  json c = Claim(uid);
  c["metadata"]["annotations"] = json::object();
  if (!selected.empty()) c["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] = selected;
  return c;
}

bool Promised(World& w, const std::string& uid, std::string* node, Kind* kind) {
  std::string pool;
  return w.ledger.Find(uid, node, &pool, kind);
}

TEST(TrackClaim, TheExtendersPromiseSurvivesUpdatesBeforeANodeIsSelected) {
  World w;
  w.Load({Waiting("u1")}, {}, {WaitingClass()});
  ASSERT_TRUE(w.ledger.Promise("u1", "n2", "fast", GiB, Kind::kScheduling,
                               CapacityLedger::Clock::now() + std::chrono::seconds(30)));
  // The claim's add event arrives after the extender let its pod through.
  TrackClaim(w.ctx, DecodeClaim(Waiting("u1")));
  std::string node;
  Kind kind;
  ASSERT_TRUE(Promised(w, "u1", &node, &kind));
  EXPECT_EQ(node, "n2");
  EXPECT_EQ(kind, Kind::kScheduling);
}

TEST(TrackClaim, TheSelectedNodeTakesThePromiseAndItsRemovalEndsIt) {
  World w;
  w.Load({Waiting("u1")}, {}, {WaitingClass()});
  w.ledger.Promise("u1", "n2", "fast", GiB, Kind::kScheduling, CapacityLedger::Clock::now() + std::chrono::seconds(30));
  // The scheduler chose n1 after all; the annotation alone is enough (the
  // PV controller names the provisioner only later).
  TrackClaim(w.ctx, DecodeClaim(Waiting("u1", "n1")));
  std::string node;
  Kind kind;
  ASSERT_TRUE(Promised(w, "u1", &node, &kind));
  EXPECT_EQ(node, "n1");
  EXPECT_EQ(kind, Kind::kSelected);
  // The provisioner asked for another node: selected-node removed.
  TrackClaim(w.ctx, DecodeClaim(Waiting("u1")));
  EXPECT_FALSE(Promised(w, "u1", &node, &kind));
}

TEST(TrackClaim, BoundClaimsAndOtherClassesHoldNothing) {
  World w;
  w.Load({}, {}, {WaitingClass(), Class("now")});
  w.ledger.Promise("u1", "n1", "fast", GiB, Kind::kSelected, CapacityLedger::Clock::now() + std::chrono::minutes(1));
  json bound = Waiting("u1", "n1");
  bound["spec"]["volumeName"] = "pvc-u1";
  TrackClaim(w.ctx, DecodeClaim(bound));
  std::string node;
  Kind kind;
  EXPECT_FALSE(Promised(w, "u1", &node, &kind));

  w.ledger.Promise("u2", "n1", "fast", GiB, Kind::kScheduling, CapacityLedger::Clock::now() + std::chrono::minutes(1));
  json immediate = Waiting("u2");
  immediate["spec"]["storageClassName"] = "now";
  TrackClaim(w.ctx, DecodeClaim(immediate));
  EXPECT_FALSE(Promised(w, "u2", &node, &kind));
}

TEST(PendingPodClaims, OnlyUnboundWaitingClaimsOfOurClasses) {
  World w;
  json bound = Waiting("b");
  bound["spec"]["volumeName"] = "pvc-b";
  json immediate = Waiting("i");
  immediate["spec"]["storageClassName"] = "now";
  json foreign = Waiting("f");
  foreign["spec"]["storageClassName"] = "theirs";
  json theirs = Class("theirs");
  theirs["provisioner"] = "example.com/other";
  theirs["volumeBindingMode"] = "WaitForFirstConsumer";
  json big = Waiting("w");
  big["spec"]["resources"]["requests"]["storage"] = "3Gi";
  w.Load({big, bound, immediate, foreign}, {}, {WaitingClass(), Class("now"), theirs});
  auto found = PendingPodClaims(w.ctx, "app", {"data-w", "data-b", "data-i", "data-f", "data-missing"});
  auto& got = found.pending;
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].uid, "w");
  EXPECT_EQ(got[0].name, "data-w");
  EXPECT_EQ(got[0].pool, "fast");
  EXPECT_EQ(got[0].bytes, 3 * GiB);
  // Claims of other classes, bound or Immediate ones are known, not ours;
  // a name the cache lacks is reported, so the extender does not judge
  // the pod without it.
  EXPECT_EQ(found.unknown, std::vector<std::string>({"data-missing"}));
  auto elsewhere = PendingPodClaims(w.ctx, "elsewhere", {"data-w"});
  EXPECT_TRUE(elsewhere.pending.empty());
  EXPECT_EQ(elsewhere.unknown, std::vector<std::string>({"data-w"}));
}

}  // namespace
}  // namespace nodevol::provisioner
