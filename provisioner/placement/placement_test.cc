#include "placement/placement.h"
#include "base/size.h"

#include <gtest/gtest.h>

#include <map>

namespace nodevol::provisioner {
namespace {


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

// Rooms with nothing promised; `promised` adds bytes per node/pool.
std::vector<PoolRoom> Rooms(const std::vector<PoolSeen>& seen, std::map<std::string, uint64_t> promised = {}) {
  std::vector<PoolRoom> out;
  for (const auto& s : seen) out.push_back({s, s.free_bytes, promised[s.node + "/" + s.pool]});
  return out;
}

std::string Placed(const std::vector<PoolRoom>& rooms, PlacementRequest req, PlacementPolicy policy) {
  std::string node;
  Status st = Place(rooms, req, policy, &node);
  return st.ok() ? node : "error: " + st.message();
}
std::string Placed(const std::vector<PoolSeen>& seen, PlacementRequest req, PlacementPolicy policy) {
  return Placed(Rooms(seen), req, policy);
}

TEST(Placement, MostFreeSpreadsBinpackFills) {
  EXPECT_EQ(Placed(ThreeNodes(), Req("fast", "", 3 * GiB), PlacementPolicy::kMostFree), "n1");
  EXPECT_EQ(Placed(ThreeNodes(), Req("fast", "", 3 * GiB), PlacementPolicy::kBinpack), "n2");
  EXPECT_EQ(Placed(ThreeNodes(), Req("fast", "", 5 * GiB), PlacementPolicy::kBinpack), "n3");
}

TEST(Placement, PromisedBytesCountAsUsed) {
  // n1 has 3 GiB of room left, n3 6 GiB.
  auto rooms = Rooms(ThreeNodes(), {{"n1/fast", 7 * GiB}});
  EXPECT_EQ(Placed(rooms, Req("fast", "", 3 * GiB), PlacementPolicy::kMostFree), "n3");
  rooms = Rooms(ThreeNodes(), {{"n1/fast", 7 * GiB}, {"n3/fast", 5 * GiB}});
  EXPECT_EQ(Placed(rooms, Req("fast", "", 4 * GiB), PlacementPolicy::kMostFree), "n2");
  std::string out = Placed(rooms, Req("fast", "", 5 * GiB), PlacementPolicy::kMostFree);
  EXPECT_NE(out.find("n1: 3.0GiB free (7.0GiB promised)"), std::string::npos) << out;
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
  Status st = Place(Rooms(ThreeNodes()), Req("fast", "", 20 * GiB), PlacementPolicy::kMostFree, &node);
  EXPECT_EQ(st.code(), Status::Code::kResourceExhausted);
  EXPECT_NE(st.message().find("n1: 10.0GiB free"), std::string::npos) << st.message();
  st = Place(Rooms(ThreeNodes()), Req("none", "", GiB), PlacementPolicy::kMostFree, &node);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  auto seen = ThreeNodes();
  for (auto& s : seen) s.reachable = false;
  st = Place(Rooms(seen), Req("fast", "", GiB), PlacementPolicy::kMostFree, &node);
  EXPECT_EQ(st.code(), Status::Code::kUnavailable) << st.message();
  // WaitForFirstConsumer restricted to a node without the pool.
  PlacementRequest req = Req("fast", "", GiB, {"n9"}, true);
  st = Place(Rooms(ThreeNodes()), req, PlacementPolicy::kMostFree, &node);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.message();
}

TEST(Placement, TiesGoToTheSmallerName) {
  std::vector<PoolSeen> seen = {{"b", "p", "dir", GiB, true}, {"a", "p", "dir", GiB, true}};
  EXPECT_EQ(Placed(seen, Req("p", "", 1), PlacementPolicy::kMostFree), "a");
  EXPECT_EQ(Placed(seen, Req("p", "", 1), PlacementPolicy::kBinpack), "a");
}

}  // namespace
}  // namespace nodevol::provisioner
