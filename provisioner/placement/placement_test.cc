#include "placement/placement.h"

#include <gtest/gtest.h>

namespace nodevol::provisioner {
namespace {

constexpr uint64_t GiB = 1ull << 30;

std::vector<PoolSeen> ThreeNodes() {
  return {{"n1", "fast", "lvm", 10 * GiB, true},
          {"n2", "fast", "lvm", 4 * GiB, true},
          {"n3", "fast", "lvm", 6 * GiB, true},
          {"n3", "slow", "dir", 100 * GiB, true}};
}

PlacementRequest Req(std::string pool, std::string backend, uint64_t bytes, std::set<std::string> allowed = {},
                     bool restrict = false) {
  PlacementRequest r;
  r.pool = pool, r.backend = backend, r.bytes = bytes, r.allowed_nodes = allowed, r.restrict_nodes = restrict;
  return r;
}

std::string Placed(const std::vector<PoolSeen>& seen, PlacementRequest req, PlacementPolicy policy,
                   const Reservations& r = Reservations()) {
  std::string node;
  Status st = Place(seen, req, r, policy, &node);
  return st.ok() ? node : "error: " + st.message();
}

TEST(Placement, MostFreeSpreadsBinpackFills) {
  EXPECT_EQ(Placed(ThreeNodes(), Req("fast", "", 3 * GiB), PlacementPolicy::kMostFree), "n1");
  EXPECT_EQ(Placed(ThreeNodes(), Req("fast", "", 3 * GiB), PlacementPolicy::kBinpack), "n2");
  EXPECT_EQ(Placed(ThreeNodes(), Req("fast", "", 5 * GiB), PlacementPolicy::kBinpack), "n3");
}

TEST(Placement, ReservedBytesCountAsUsed) {
  Reservations r;
  r.Reserve("claim-a", "n1", "fast", 7 * GiB);
  // n1 has 3 GiB of room left, n3 6 GiB.
  EXPECT_EQ(Placed(ThreeNodes(), Req("fast", "", 3 * GiB), PlacementPolicy::kMostFree, r), "n3");
  r.Reserve("claim-b", "n3", "fast", 5 * GiB);
  EXPECT_EQ(Placed(ThreeNodes(), Req("fast", "", 4 * GiB), PlacementPolicy::kMostFree, r), "n2");
  r.Done("claim-b", /*ok=*/false);  // failed create: bytes back at once
  EXPECT_EQ(Placed(ThreeNodes(), Req("fast", "", 4 * GiB), PlacementPolicy::kMostFree, r), "n3");
}

TEST(Placement, DoneReservationsLingerUntilTheNodeReportsThem) {
  Reservations r(std::chrono::seconds(10));
  auto t0 = Reservations::Clock::now();
  r.Reserve("c", "n1", "fast", 5 * GiB);
  r.Done("c", true, t0);
  EXPECT_EQ(r.Reserved("n1", "fast", t0 + std::chrono::seconds(9)), 5 * GiB);
  EXPECT_EQ(r.Reserved("n1", "fast", t0 + std::chrono::seconds(11)), 0u);
}

TEST(Placement, AllowedNodesAndBackendFilter) {
  PlacementRequest req = Req("fast", "", 1 * GiB, {"n2", "n3"});
  EXPECT_EQ(Placed(ThreeNodes(), req, PlacementPolicy::kMostFree), "n3");
  req.allowed_nodes = {"n2"};
  EXPECT_EQ(Placed(ThreeNodes(), req, PlacementPolicy::kMostFree), "n2");
  // A pool of the wrong kind is no candidate, and the error says so.
  std::string out = Placed(ThreeNodes(), Req("slow", "lvm", 1 * GiB), PlacementPolicy::kMostFree);
  EXPECT_NE(out.find("n3: pool slow is dir, the class wants lvm"), std::string::npos) << out;
}

TEST(Placement, ErrorsSayWhyPerNode) {
  std::string node;
  Status st = Place(ThreeNodes(), Req("fast", "", 20 * GiB), Reservations(), PlacementPolicy::kMostFree, &node);
  EXPECT_EQ(st.code(), Status::Code::kResourceExhausted);
  EXPECT_NE(st.message().find("n1: 10.0GiB free"), std::string::npos) << st.message();
  st = Place(ThreeNodes(), Req("none", "", GiB), Reservations(), PlacementPolicy::kMostFree, &node);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  auto seen = ThreeNodes();
  for (auto& s : seen) s.reachable = false;
  st = Place(seen, Req("fast", "", GiB), Reservations(), PlacementPolicy::kMostFree, &node);
  EXPECT_EQ(st.code(), Status::Code::kUnavailable) << st.message();
  // WaitForFirstConsumer restricted to a node without the pool.
  PlacementRequest req = Req("fast", "", GiB, {"n9"}, true);
  st = Place(ThreeNodes(), req, Reservations(), PlacementPolicy::kMostFree, &node);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.message();
}

TEST(Placement, TiesGoToTheSmallerName) {
  std::vector<PoolSeen> seen = {{"b", "p", "dir", GiB, true}, {"a", "p", "dir", GiB, true}};
  EXPECT_EQ(Placed(seen, Req("p", "", 1), PlacementPolicy::kMostFree), "a");
  EXPECT_EQ(Placed(seen, Req("p", "", 1), PlacementPolicy::kBinpack), "a");
}

}  // namespace
}  // namespace nodevol::provisioner
