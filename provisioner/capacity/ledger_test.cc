#include "capacity/ledger.h"

#include <gtest/gtest.h>

#include "placement/seen_test.h"
#include "base/size.h"

namespace nodevol::provisioner {
namespace {

using Kind = CapacityLedger::Kind;
using LedgerClock = CapacityLedger::Clock;

uint64_t RoomOf(const CapacityLedger& l, const std::string& node, const std::string& pool,
                const std::set<std::string>& except = {}, LedgerClock::time_point now = LedgerClock::now()) {
  for (const auto& r : l.Rooms(except, now))
    if (r.seen.node == node && r.seen.pool == pool) return r.room();
  ADD_FAILURE() << "no pool " << node << "/" << pool;
  return 0;
}

std::vector<PoolSeen> Pools() {
  return {Seen("n1", "fast", "lvm", 100 * MiB, true, 200 * MiB, 100 * MiB, true),
          Seen("n2", "fast", "lvm", 100 * MiB, true, 200 * MiB, 100 * MiB, true)};
}

TEST(CapacityLedger, UnenforcedPoolsCountTheSizesOfTheirVolumes) {
  // A tmpfs dir pool of 100 MiB, 90 free, with 60 MiB of (empty) volumes:
  // only 40 MiB may still be promised.
  PoolSeen dir = Seen("n", "d", "dir", 90 * MiB, true, 100 * MiB, 60 * MiB, false);
  EXPECT_EQ(BaseRoom(dir), 40 * MiB);
  dir.allocated_bytes = 5 * MiB;  // the free space is the smaller figure
  EXPECT_EQ(BaseRoom(dir), 90 * MiB);
  dir.allocated_bytes = 300 * MiB;  // more made than the pool holds: none
  EXPECT_EQ(BaseRoom(dir), 0u);
  PoolSeen enforced = Seen("n", "l", "lvm", 90 * MiB, true, 100 * MiB, 300 * MiB, true);  // thin, overprovisioned
  EXPECT_EQ(BaseRoom(enforced), 90 * MiB);
  PoolSeen nfs = Seen("n", "s", "nfs", 90 * MiB, true, 100 * MiB, 300 * MiB, false);  // shared, sizes advisory
  EXPECT_EQ(BaseRoom(nfs), 90 * MiB);
}

// Issue 30 item 8: every node serving an NFS export reports the export's
// whole free space; a promise made on one node's pool takes it from all of
// them, or a burst over N nodes would promise the export N times.
TEST(CapacityLedger, APromiseOnASharedExportCountsOnEveryNodeServingIt) {
  std::vector<PoolSeen> pools = {Seen("n1", "shared", "nfs", 100 * MiB, true, 200 * MiB, 0, false),
                                 Seen("n2", "shared", "nfs", 100 * MiB, true, 200 * MiB, 0, false),
                                 Seen("n3", "other", "nfs", 100 * MiB, true, 200 * MiB, 0, false),
                                 Seen("n1", "fast", "lvm", 100 * MiB, true, 200 * MiB, 0, true)};
  pools[0].shared_by = pools[1].shared_by = "nfs:10.0.0.5:/export";
  pools[2].shared_by = "nfs:10.0.0.5:/other";
  CapacityLedger l([&] { return pools; });
  ASSERT_TRUE(l.Promise("c1", "n1", "shared", 70 * MiB, Kind::kSelected));
  EXPECT_EQ(RoomOf(l, "n1", "shared"), 30 * MiB);
  EXPECT_EQ(RoomOf(l, "n2", "shared"), 30 * MiB) << "n2 would promise the export's bytes again";
  EXPECT_EQ(RoomOf(l, "n3", "other"), 100 * MiB) << "another export of the same server";
  EXPECT_EQ(RoomOf(l, "n1", "fast"), 100 * MiB) << "a node-local pool of the same node";
  EXPECT_EQ(RoomOf(l, "n2", "shared", {"c1"}), 100 * MiB) << "a claim's own promise, left out, everywhere";
  ASSERT_TRUE(l.Promise("c2", "n2", "shared", 20 * MiB, Kind::kSelected));
  EXPECT_EQ(RoomOf(l, "n1", "shared"), 10 * MiB);
  l.Release("c1");
  EXPECT_EQ(RoomOf(l, "n1", "shared"), 80 * MiB);
  // Without the shared identity (an older nodevold), each node counts its own.
  pools[0].shared_by = pools[1].shared_by = "";
  EXPECT_EQ(RoomOf(l, "n1", "shared"), 100 * MiB);
  EXPECT_EQ(RoomOf(l, "n2", "shared"), 80 * MiB);
}

TEST(CapacityLedger, OneKeyCountsOnceWhereverItsLatestPromiseIs) {
  int changes = 0;
  CapacityLedger l([] { return Pools(); });
  l.SetOnChange([&] { ++changes; });
  auto soon = LedgerClock::now() + std::chrono::seconds(30);
  ASSERT_TRUE(l.Promise("c1", "n1", "fast", 30 * MiB, Kind::kScheduling, soon));
  EXPECT_EQ(RoomOf(l, "n1", "fast"), 70 * MiB);
  // The scheduler picked n2 after all: the promise moves.
  ASSERT_TRUE(l.Promise("c1", "n2", "fast", 30 * MiB, Kind::kSelected, soon));
  EXPECT_EQ(RoomOf(l, "n1", "fast"), 100 * MiB);
  EXPECT_EQ(RoomOf(l, "n2", "fast"), 70 * MiB);
  ASSERT_TRUE(l.Promise("c1", "n2", "fast", 30 * MiB, Kind::kCreating));
  EXPECT_EQ(RoomOf(l, "n2", "fast"), 70 * MiB);
  // Its own promise is not counted against the claim deciding for itself.
  EXPECT_EQ(RoomOf(l, "n2", "fast", {"c1"}), 100 * MiB);
  EXPECT_EQ(changes, 3);
  // A renewal of the same promise is no change.
  ASSERT_TRUE(l.Promise("c1", "n2", "fast", 30 * MiB, Kind::kCreating));
  EXPECT_EQ(changes, 3);
}

// A WaitForFirstConsumer claim too large for its selected node (1000Ti
// asked, 100 MiB there) waits to be rescheduled; meanwhile the node's
// room is what it was, or every other claim placed there in that window
// failed "no room" and waited its backoff (k8s_provisioner's failover:
// 15 s more after the lease).
TEST(CapacityLedger, APromiseThePoolCouldNeverKeepIsNotCounted) {
  CapacityLedger l([] { return Pools(); });
  ASSERT_TRUE(l.Promise("huge", "n1", "fast", 1000 * 1024 * 1024 * MiB, Kind::kSelected));
  EXPECT_EQ(RoomOf(l, "n1", "fast"), 100 * MiB);
  ASSERT_TRUE(l.Promise("fits", "n1", "fast", 30 * MiB, Kind::kSelected));
  EXPECT_EQ(RoomOf(l, "n1", "fast"), 70 * MiB);
  EXPECT_EQ(RoomOf(l, "n1", "fast", {"huge"}), 70 * MiB) << "left out, it is not taken back either";
  // Exactly the pool's base still fits, and counts.
  ASSERT_TRUE(l.Promise("fits", "n1", "fast", 100 * MiB, Kind::kSelected));
  EXPECT_EQ(RoomOf(l, "n1", "fast"), 0u);
  // Still where the claim's promise is, for TrackClaim and the extender.
  std::string node, pool;
  Kind kind;
  ASSERT_TRUE(l.Find("huge", &node, &pool, &kind));
  EXPECT_EQ(node, "n1");
  // A create is counted whatever its size: it was placed on figures that
  // had the room, and a report may already hold part of it.
  l.Release("fits");
  ASSERT_TRUE(l.Promise("big", "n2", "fast", 150 * MiB, Kind::kCreating));
  EXPECT_EQ(RoomOf(l, "n2", "fast"), 0u);
}

TEST(CapacityLedger, ACreateIsNotReleasedOrWeakenedWhileItRuns) {
  CapacityLedger l([] { return Pools(); }, std::chrono::seconds(10));
  ASSERT_TRUE(l.Promise("c", "n1", "fast", 50 * MiB, Kind::kCreating));
  // The claim's informer update (still selected, not bound) and the
  // extender must not move or drop a running create.
  EXPECT_FALSE(l.Promise("c", "n2", "fast", 50 * MiB, Kind::kSelected, LedgerClock::now() + std::chrono::minutes(1)));
  l.Release("c");
  EXPECT_EQ(RoomOf(l, "n1", "fast"), 50 * MiB);
  // Done: counted `linger` more (nodevold's next report has the volume),
  // and the claim binding meanwhile does not drop it early.
  auto t0 = LedgerClock::now();
  l.Settle("c", true, t0);
  l.Release("c");
  EXPECT_EQ(RoomOf(l, "n1", "fast", {}, t0 + std::chrono::seconds(9)), 50 * MiB);
  EXPECT_EQ(RoomOf(l, "n1", "fast", {}, t0 + std::chrono::seconds(11)), 100 * MiB);
}

TEST(CapacityLedger, AFailedCreateGivesItsBytesBackAtOnce) {
  CapacityLedger l([] { return Pools(); });
  ASSERT_TRUE(l.Promise("c", "n1", "fast", 50 * MiB, Kind::kCreating));
  l.Settle("c", false);
  EXPECT_EQ(RoomOf(l, "n1", "fast"), 100 * MiB);
}

TEST(CapacityLedger, PromisesEnd) {
  CapacityLedger l([] { return Pools(); });
  auto t0 = LedgerClock::now();
  ASSERT_TRUE(l.Promise("pod-claim", "n1", "fast", 60 * MiB, Kind::kScheduling, t0 + std::chrono::seconds(30)));
  ASSERT_TRUE(l.Promise("sel", "n1", "fast", 10 * MiB, Kind::kSelected, t0 + std::chrono::minutes(10)));
  EXPECT_EQ(RoomOf(l, "n1", "fast", {}, t0), 30 * MiB);
  EXPECT_EQ(RoomOf(l, "n1", "fast", {}, t0 + std::chrono::seconds(31)), 90 * MiB);
  l.Release("sel");
  EXPECT_EQ(RoomOf(l, "n1", "fast", {}, t0 + std::chrono::seconds(31)), 100 * MiB);
  std::string node, pool;
  Kind kind;
  EXPECT_TRUE(l.Find("pod-claim", &node, &pool, &kind, t0));
  EXPECT_EQ(node, "n1");
  EXPECT_FALSE(l.Find("pod-claim", &node, &pool, &kind, t0 + std::chrono::seconds(31)));
  EXPECT_FALSE(l.Find("sel", &node, &pool, &kind, t0));
  // The publisher wakes at the next end, never at one already past.
  EXPECT_EQ(l.NextExpiry(), t0 + std::chrono::seconds(30));
}

TEST(CapacityLedger, NextExpirySkipsEndedPromises) {
  CapacityLedger l([] { return Pools(); });
  EXPECT_EQ(l.NextExpiry(), LedgerClock::time_point::max());
  ASSERT_TRUE(l.Promise("gone", "n1", "fast", MiB, Kind::kScheduling, LedgerClock::now() - std::chrono::seconds(1)));
  EXPECT_EQ(l.NextExpiry(), LedgerClock::time_point::max());
  ASSERT_TRUE(l.Promise("c", "n1", "fast", MiB, Kind::kCreating));
  EXPECT_EQ(l.NextExpiry(), LedgerClock::time_point::max());  // a running create ends when it ends
}

}  // namespace
}  // namespace nodevol::provisioner

namespace nodevol::provisioner {
namespace {

// A finished create counts until the node's figures change after it (that
// report has the volume), not twice for the rest of its linger.
TEST(CapacityLedger, ANewReportEndsAFinishedCreate) {
  auto t0 = LedgerClock::now();
  std::vector<PoolSeen> seen = Pools();
  seen[0].figures_at = t0;
  CapacityLedger l([&] { return seen; }, std::chrono::seconds(10));
  ASSERT_TRUE(l.Promise("c", "n1", "fast", 40 * MiB, Kind::kCreating));
  l.Settle("c", true, t0 + std::chrono::seconds(1));
  EXPECT_EQ(RoomOf(l, "n1", "fast", {}, t0 + std::chrono::seconds(2)), 60 * MiB);
  // nodevold's next report: its free bytes already without the volume.
  seen[0].free_bytes = 60 * MiB;
  seen[0].figures_at = t0 + std::chrono::seconds(2);
  EXPECT_EQ(RoomOf(l, "n1", "fast", {}, t0 + std::chrono::seconds(3)), 60 * MiB);
  // A create still running is counted whatever the reports say.
  ASSERT_TRUE(l.Promise("d", "n1", "fast", 10 * MiB, Kind::kCreating));
  EXPECT_EQ(RoomOf(l, "n1", "fast", {}, t0 + std::chrono::seconds(3)), 50 * MiB);
}

}  // namespace
}  // namespace nodevol::provisioner

namespace nodevol::provisioner {
namespace {

// After its volume is made, a claim waits for the PV controller to bind it
// (seconds in a burst); its updates meanwhile still carry selected-node,
// and promising that node again would count the volume twice (seen on the
// real scheduler: a node refused with "0B free" while half empty).
TEST(CapacityLedger, AMadeVolumeIsNotPromisedAgainUntilItsClaimIsReleased) {
  CapacityLedger l([] { return Pools(); }, std::chrono::milliseconds(0));
  ASSERT_TRUE(l.Promise("c", "n1", "fast", 50 * MiB, Kind::kCreating));
  l.Settle("c", true);  // linger 0: no longer counted
  EXPECT_EQ(RoomOf(l, "n1", "fast"), 100 * MiB);
  EXPECT_FALSE(l.Promise("c", "n1", "fast", 50 * MiB, Kind::kSelected, LedgerClock::now() + std::chrono::minutes(1)));
  EXPECT_FALSE(l.Promise("c", "n2", "fast", 50 * MiB, Kind::kScheduling, LedgerClock::now() + std::chrono::minutes(1)));
  EXPECT_EQ(RoomOf(l, "n1", "fast"), 100 * MiB);
  EXPECT_EQ(RoomOf(l, "n2", "fast"), 100 * MiB);
  // Bound (or deleted): released, and nothing of it is kept any longer.
  l.Release("c");
  EXPECT_TRUE(l.Promise("c", "n2", "fast", 50 * MiB, Kind::kSelected, LedgerClock::now() + std::chrono::minutes(1)));
  // A new create of the same key (a retry after a failed save) is always taken.
  ASSERT_TRUE(l.Promise("d", "n1", "fast", 10 * MiB, Kind::kCreating));
  l.Settle("d", true);
  EXPECT_TRUE(l.Promise("d", "n1", "fast", 10 * MiB, Kind::kCreating));
}

TEST(CapacityLedger, ABurstOfMadeVolumesIsRememberedWithoutBeingCounted) {
  // 10,000 creates done and not yet bound (the PV controller lags a burst
  // by minutes): none counts once reported, each still refuses a weaker
  // promise, and none is found as a promise.
  CapacityLedger l([] { return Pools(); }, std::chrono::milliseconds(0));
  for (int i = 0; i < 10000; ++i) {
    std::string key = "c" + std::to_string(i);
    ASSERT_TRUE(l.Promise(key, "n1", "fast", MiB, Kind::kCreating));
    l.Settle(key, true);
  }
  EXPECT_EQ(RoomOf(l, "n1", "fast"), 100 * MiB);
  std::string node, pool;
  Kind kind;
  EXPECT_FALSE(l.Find("c42", &node, &pool, &kind));
  EXPECT_FALSE(l.Promise("c42", "n2", "fast", MiB, Kind::kSelected, LedgerClock::now() + std::chrono::minutes(1)));
  EXPECT_EQ(RoomOf(l, "n2", "fast"), 100 * MiB);
  l.Release("c42");
  EXPECT_TRUE(l.Promise("c42", "n2", "fast", MiB, Kind::kSelected, LedgerClock::now() + std::chrono::minutes(1)));
  EXPECT_EQ(RoomOf(l, "n2", "fast"), 99 * MiB);
}

}  // namespace
}  // namespace nodevol::provisioner

namespace nodevol::provisioner {
namespace {

// nodevold names the first capacity sample with the volume: the figures'
// times cannot tell (a sample under way when the create finished arrives
// after the answer without the volume; one taken after it can arrive
// before the answer).
TEST(CapacityLedger, TheNamedSampleEndsAFinishedCreate) {
  auto t0 = LedgerClock::now();
  std::vector<PoolSeen> seen = Pools();
  seen[0].sample = 5;
  seen[0].figures_at = t0;
  CapacityLedger l([&] { return seen; }, std::chrono::seconds(10));
  ASSERT_TRUE(l.Promise("c", "n1", "fast", 40 * MiB, Kind::kCreating));
  l.Settle("c", true, t0 + std::chrono::seconds(1), /*included_from=*/7);
  // Sample 6 arrives after the answer: new figures, but not yet the volume.
  seen[0].sample = 6;
  seen[0].figures_at = t0 + std::chrono::seconds(2);
  EXPECT_EQ(RoomOf(l, "n1", "fast", {}, t0 + std::chrono::seconds(2)), 60 * MiB);
  // Sample 7 has it: counted once, in the figures.
  seen[0].free_bytes = 60 * MiB;
  seen[0].sample = 7;
  EXPECT_EQ(RoomOf(l, "n1", "fast", {}, t0 + std::chrono::seconds(2)), 60 * MiB);
  // And a sample that came before the answer (figures older than it) ends it too.
  ASSERT_TRUE(l.Promise("d", "n1", "fast", 10 * MiB, Kind::kCreating));
  seen[0].sample = 9;
  seen[0].free_bytes = 50 * MiB;
  l.Settle("d", true, t0 + std::chrono::seconds(5), /*included_from=*/9);
  EXPECT_EQ(RoomOf(l, "n1", "fast", {}, t0 + std::chrono::seconds(5)), 50 * MiB);
}

}  // namespace
}  // namespace nodevol::provisioner
