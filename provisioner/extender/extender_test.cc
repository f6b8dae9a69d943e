#include "extender/extender.h"

#include <gtest/gtest.h>

#include <thread>

#include "placement/seen_test.h"
#include "base/size.h"

namespace nodevol::provisioner {
namespace {

using Kind = CapacityLedger::Kind;

// Three nodes with 100/200/400 MiB in pool "fast" (as tests/k8s does);
// n3 also has a "bulk" lvm pool; n4 is unreachable; n5 runs no nodevold.
std::vector<PoolSeen> Pools() {
  return {Seen("n1", "fast", "dir", 100 * MiB, true, 100 * MiB, 0, true),
          Seen("n2", "fast", "dir", 200 * MiB, true, 200 * MiB, 0, true),
          Seen("n3", "fast", "dir", 400 * MiB, true, 400 * MiB, 0, true),
          Seen("n3", "bulk", "lvm", 50 * MiB, true, 50 * MiB, 0, true),
          Seen("n4", "fast", "dir", 400 * MiB, false, 400 * MiB, 0, true)};
}

struct ExtenderTest : ::testing::Test {
  CapacityLedger ledger{[] { return Pools(); }};
  std::map<std::string, PendingClaim> claims;  // "ns/name" -> claim
  std::set<std::string> uncached;              // names the cache has not seen yet
  int lookups = 0;
  Extender ext{&ledger,
               [this](const std::string& ns, const std::vector<std::string>& names) {
                 ++lookups;
                 PodClaims out;
                 for (const auto& n : names)
                   if (auto it = claims.find(ns + "/" + n); it != claims.end()) out.pending.push_back(it->second);
                   else if (uncached.count(n)) out.unknown.push_back(n);
                 return out;
               },
               PlacementPolicy::kMostFree};

  void Claim(const std::string& name, const std::string& pool, uint64_t bytes, const std::string& backend = "") {
    claims["ns/" + name] = {"uid-" + name, name, pool, backend, bytes};
  }
  ExtenderArgs Args(std::vector<std::string> claim_names,
                    std::vector<std::string> nodes = {"n1", "n2", "n3", "n4", "n5"}) {
    ExtenderArgs a;
    a.pod_namespace = "ns";
    a.pod_name = "p";
    a.claim_names = std::move(claim_names);
    a.node_names = std::move(nodes);
    a.node_names_given = true;
    return a;
  }
  std::string PromisedNode(const std::string& claim) {
    std::string node, pool;
    Kind kind;
    return ledger.Find("uid-" + claim, &node, &pool, &kind) ? node : "";
  }
};

TEST_F(ExtenderTest, PodWithoutOurClaimsPassesEverywhereUntouched) {
  auto a = ext.Filter(Args({"not-ours"}));
  EXPECT_EQ(a.nodes, (std::vector<std::string>{"n1", "n2", "n3", "n4", "n5"}));
  EXPECT_TRUE(a.failed.empty());
  EXPECT_TRUE(a.unresolvable.empty());
  EXPECT_EQ(a.promised, "");
  for (const auto& s : ext.Prioritize(Args({}))) EXPECT_EQ(s.score, 0) << s.node;
}

TEST_F(ExtenderTest, ClaimsWhoseSumOverflowsFitNowhere) {
  // 2^63 + 2^63 + 3 GiB wrapped to "needs 3.0GiB" (issue 57, item 9): every
  // node had room, and the pod was promised one.
  Claim("huge1", "fast", uint64_t{1} << 63);
  Claim("huge2", "fast", uint64_t{1} << 63);
  Claim("small", "fast", 3 * GiB);
  auto a = ext.Filter(Args({"huge1", "huge2", "small"}));
  EXPECT_TRUE(a.nodes.empty());
  EXPECT_EQ(a.promised, "");
  ASSERT_TRUE(a.failed.count("n3")) << "n3 is short of room, not passed";
  EXPECT_EQ(a.failed["n3"].find("3.0GiB"), std::string::npos) << a.failed["n3"];
}

TEST_F(ExtenderTest, ClaimNotCachedYetFailsTheAttemptAndPromisesNothing) {
  // The trial's reschedules: a pod whose claim our watch had not delivered
  // passed every node unpromised, and the scheduler put it on a node the
  // burst's promises had already filled.
  Claim("a", "fast", 50 * MiB);
  uncached.insert("late");
  auto r = ext.Filter(Args({"a", "late"}));
  EXPECT_NE(r.error.find("ns/late"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("tried again"), std::string::npos) << r.error;
  EXPECT_TRUE(r.nodes.empty());
  EXPECT_TRUE(r.promised.empty());
  EXPECT_EQ(PromisedNode("a"), "");  // nothing held for a pod not judged
  for (const auto& s : ext.Prioritize(Args({"a", "late"}))) EXPECT_EQ(s.score, 0) << s.node;

  // Once the claim arrives, the pod is judged as usual.
  uncached.clear();
  Claim("late", "fast", 10 * MiB);
  r = ext.Filter(Args({"a", "late"}));
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.promised, "n3");
  EXPECT_EQ(PromisedNode("late"), "n3");
}

TEST_F(ExtenderTest, FiltersOnTheSumOfThePodsClaimsWithReasons) {
  // Two 80 MiB claims: each alone fits n1 (100 MiB), together they do not.
  Claim("a", "fast", 80 * MiB);
  Claim("b", "fast", 80 * MiB);
  auto a = ext.Filter(Args({"a", "b"}));
  EXPECT_EQ(a.nodes, (std::vector<std::string>{"n2", "n3"}));
  ASSERT_EQ(a.failed.count("n1"), 1u);
  EXPECT_NE(a.failed["n1"].find("n1: pool fast has 100.0MiB free, this pod needs 160.0MiB"), std::string::npos)
      << a.failed["n1"];
  EXPECT_NE(a.failed["n4"].find("unreachable"), std::string::npos);
  ASSERT_EQ(a.unresolvable.count("n5"), 1u);
  EXPECT_NE(a.unresolvable["n5"].find("no nodevold"), std::string::npos);
  // The roomiest node is promised both claims, for the next pod to see.
  EXPECT_EQ(a.promised, "n3");
  EXPECT_EQ(PromisedNode("a"), "n3");
  EXPECT_EQ(PromisedNode("b"), "n3");
}

TEST_F(ExtenderTest, APodIsNotCountedAgainstItselfWhenFilteredAgain) {
  Claim("a", "fast", 300 * MiB);
  EXPECT_EQ(ext.Filter(Args({"a"})).nodes, (std::vector<std::string>{"n3"}));
  // The retry still sees n3's 400 MiB, not 100 MiB after its own promise.
  auto again = ext.Filter(Args({"a"}));
  EXPECT_EQ(again.nodes, (std::vector<std::string>{"n3"}));
  EXPECT_EQ(again.promised, "n3");
}

TEST_F(ExtenderTest, ABurstIsSpreadWithoutOvercommittingANode) {
  // 7 pods of 90 MiB: the nodes hold 1 + 2 + 4 of them (700 MiB in all).
  std::map<std::string, int> placed;
  for (int i = 0; i < 7; ++i) {
    std::string name = "c" + std::to_string(i);
    Claim(name, "fast", 90 * MiB);
    auto a = ext.Filter(Args({name}, {"n1", "n2", "n3"}));
    ASSERT_FALSE(a.promised.empty()) << "pod " << i << " found no node";
    ++placed[a.promised];
  }
  EXPECT_EQ(placed["n1"], 1);
  EXPECT_EQ(placed["n2"], 2);
  EXPECT_EQ(placed["n3"], 4);
  // The eighth fits nowhere, and every node says why.
  Claim("c7", "fast", 90 * MiB);
  auto a = ext.Filter(Args({"c7"}, {"n1", "n2", "n3"}));
  EXPECT_TRUE(a.nodes.empty());
  EXPECT_EQ(a.failed.size(), 3u);
  EXPECT_NE(a.failed["n3"].find("promised"), std::string::npos) << a.failed["n3"];
}

TEST_F(ExtenderTest, PoolsAndKindsANodeCannotServeAreUnresolvable) {
  Claim("a", "fast", 10 * MiB);
  Claim("b", "bulk", 10 * MiB, "lvm");
  auto a = ext.Filter(Args({"a", "b"}, {"n1", "n3"}));
  EXPECT_EQ(a.nodes, (std::vector<std::string>{"n3"}));
  EXPECT_NE(a.unresolvable["n1"].find("no pool bulk"), std::string::npos);
  claims["ns/b"].backend = "nfs";
  a = ext.Filter(Args({"a", "b"}, {"n3"}));
  EXPECT_TRUE(a.nodes.empty());
  EXPECT_NE(a.unresolvable["n3"].find("is lvm, the class wants nfs"), std::string::npos);
}

TEST_F(ExtenderTest, ARestoreGoesOnlyWhereItsSnapshotIs) {
  Claim("r", "fast", 10 * MiB);
  claims["ns/r"].node = "n1";
  claims["ns/r"].source = "VolumeSnapshot ns/before";
  auto a = ext.Filter(Args({"r"}, {"n1", "n2", "n3"}));
  EXPECT_EQ(a.nodes, (std::vector<std::string>{"n1"}));  // n3 has more room
  EXPECT_EQ(a.promised, "n1");
  EXPECT_NE(a.unresolvable["n3"].find("VolumeSnapshot ns/before, which is on node n1"), std::string::npos)
      << a.unresolvable["n3"];
  // Its node without room: nowhere, with the reason there.
  Claim("big", "fast", 150 * MiB);
  claims["ns/big"].node = "n1";
  a = ext.Filter(Args({"big"}, {"n1", "n3"}));
  EXPECT_TRUE(a.nodes.empty());
  EXPECT_NE(a.failed["n1"].find("has 90.0MiB free"), std::string::npos) << a.failed["n1"];
}

TEST_F(ExtenderTest, PromisesExpire) {
  Extender short_hold{&ledger,
                      [](const std::string&, const std::vector<std::string>&) {
                        return PodClaims{{{"uid-x", "x", "fast", "", 100 * MiB}}, {}};
                      },
                      PlacementPolicy::kMostFree, std::chrono::milliseconds(1)};
  EXPECT_EQ(short_hold.Filter(Args({"x"}, {"n1"})).promised, "n1");
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::string node, pool;
  Kind kind;
  EXPECT_FALSE(ledger.Find("uid-x", &node, &pool, &kind));
}

TEST_F(ExtenderTest, AVolumeBeingCreatedIsNotDisplacedByTheExtender) {
  Claim("a", "fast", 50 * MiB);
  ASSERT_TRUE(ledger.Promise("uid-a", "n1", "fast", 50 * MiB, Kind::kCreating));
  ext.Filter(Args({"a"}));
  EXPECT_EQ(PromisedNode("a"), "n1");
}

TEST_F(ExtenderTest, PrioritizeScoresByPolicyAndThePromisedNodeIsBest) {
  Claim("a", "fast", 50 * MiB);
  auto scores = ext.Prioritize(Args({"a"}));
  std::map<std::string, int> by;
  for (const auto& s : scores) by[s.node] = s.score;
  EXPECT_EQ(by["n3"], kMaxScore);
  EXPECT_GT(by["n2"], by["n1"]);
  EXPECT_GE(by["n1"], 1);
  EXPECT_EQ(by["n4"], 0);  // unreachable
  EXPECT_EQ(by["n5"], 0);  // no nodevold

  Extender binpack{&ledger, [this](const std::string& ns, const std::vector<std::string>& n) {
                     PodClaims out;
                     for (const auto& x : n) out.pending.push_back(claims[ns + "/" + x]);
                     return out;
                   },
                   PlacementPolicy::kBinpack};
  by.clear();
  for (const auto& s : binpack.Prioritize(Args({"a"}, {"n1", "n2", "n3"}))) by[s.node] = s.score;
  EXPECT_EQ(by["n1"], kMaxScore);
  EXPECT_GT(by["n2"], by["n3"]);
  EXPECT_EQ(binpack.Filter(Args({"a"}, {"n1", "n2", "n3"})).promised, "n1");
}

TEST_F(ExtenderTest, PrioritizeFavoursTheNodeFilterPromisedEvenIfTheLedgerMovedMeanwhile) {
  Claim("a", "fast", 50 * MiB);
  ASSERT_EQ(ext.Filter(Args({"a"})).promised, "n3");
  // Between filter and prioritize, other claims take most of n3 (a burst
  // moving promises to selected nodes): n2 is now the roomiest by policy.
  ledger.Promise("uid-other", "n3", "fast", 300 * MiB, Kind::kSelected);
  std::map<std::string, int> by;
  for (const auto& s : ext.Prioritize(Args({"a"}))) by[s.node] = s.score;
  EXPECT_EQ(by["n3"], kMaxScore);  // still fits: the scheduler must go where the bytes are held
  EXPECT_LE(by["n2"], kOtherMaxScore);
  EXPECT_GE(by["n2"], by["n1"]);
  EXPECT_GE(by["n1"], 1);

  // Once the promised node no longer fits, the best that does is preferred.
  ledger.Promise("uid-other", "n3", "fast", 380 * MiB, Kind::kSelected);
  by.clear();
  for (const auto& s : ext.Prioritize(Args({"a"}))) by[s.node] = s.score;
  EXPECT_EQ(by["n3"], 0);
  EXPECT_EQ(by["n2"], kMaxScore);
}

TEST_F(ExtenderTest, EqualNodesHaveOneBest) {
  Claim("a", "fast", 50 * MiB);
  // n3 and n4 hold the same; make n4 reachable by leaving it out: just n3 and a twin.
  CapacityLedger twin{[] {
    return std::vector<PoolSeen>{Seen("x1", "fast", "dir", 100 * MiB, true, 100 * MiB, 0, true),
                                 Seen("x2", "fast", "dir", 100 * MiB, true, 100 * MiB, 0, true)};
  }};
  Extender e{&twin, [this](const std::string& ns, const std::vector<std::string>& n) {
               return PodClaims{{claims[ns + "/" + n[0]]}, {}};
             },
             PlacementPolicy::kMostFree};
  auto scores = e.Prioritize(Args({"a"}, {"x2", "x1"}));
  ASSERT_EQ(scores.size(), 2u);
  EXPECT_EQ(scores[0].node, "x2");
  EXPECT_EQ(scores[0].score, kOtherMaxScore);
  EXPECT_EQ(scores[1].score, kMaxScore);  // x1: ties go to the smaller name, as in Place
  EXPECT_EQ(e.Filter(Args({"a"}, {"x2", "x1"})).promised, "x1");
}

}  // namespace
}  // namespace nodevol::provisioner
