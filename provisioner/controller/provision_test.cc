// The claim controller's decisions (issue 26 items 2, 3, 6) against a fake
// apiserver and fake nodevolds (controller/fakes_test.h).
#include "controller/provision.h"

#include <gtest/gtest.h>

#include "controller/fakes_test.h"
#include "base/size.h"

namespace nodevol::provisioner {
namespace {

using namespace testing;
using Outcome = Workers::Outcome;
const std::string kPvs = "/api/v1/persistentvolumes";

json PvFor(const std::string& uid, const std::string& node) {
  return {{"kind", "PersistentVolume"},
          {"apiVersion", "v1"},
          {"metadata", {{"name", "pvc-" + uid}, {"uid", "pv-uid-" + uid},
                        {"annotations", {{"pv.kubernetes.io/provisioned-by", "nodevol.io"},
                                         {"nodevol.io/node", node}, {"nodevol.io/pool", "fast"},
                                         {"nodevol.io/backend", "lvm"}}}}},
          {"spec", {{"claimRef", {{"namespace", "app"}, {"name", "data-" + uid}, {"uid", uid}}},
                    {"persistentVolumeReclaimPolicy", "Delete"}}}};
}

TEST(Provision, CreatesOnTheRoomiestNodeAndSavesThePv) {
  World w;
  FakeNode a("a"), b("b");
  w.view.Add(&a, "fast", 10 * GiB);
  w.view.Add(&b, "fast", 20 * GiB);
  w.Load({Claim("u1")});
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-u1"), Outcome::kDone);
  EXPECT_TRUE(b.HasVolume("pvc-u1"));
  EXPECT_FALSE(a.HasVolume("pvc-u1"));
  json pv = w.api.Object(kPvs + "/pvc-u1");
  EXPECT_EQ(pv["metadata"]["annotations"].value("nodevol.io/node", ""), "b");
  // A clean create writes nothing on the claim: a new leader would read
  // the node from the nodes (SeedAttempts).
  EXPECT_EQ(w.api.Writes("/persistentvolumeclaims/"), 0);
  auto reasons = w.api.EventReasons();
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "ProvisioningSucceeded"), reasons.end());
}

// The claim queue is keyed by uid: a key queued for a claim that was
// deleted and made again under the same name is not the new claim's.
TEST(Provision, AQueuedUidOfAReplacedClaimDoesNothing) {
  World w;
  FakeNode a("a");
  w.view.Add(&a, "fast", 10 * GiB);
  json again = Claim("u2");
  again["metadata"]["name"] = "data-u1";  // same name as u1's, another uid
  w.Load({again});
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-u1", "u1"), Outcome::kDone);
  EXPECT_EQ(a.creates(), 0);
  EXPECT_TRUE(w.api.EventReasons().empty());
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-u1", "u2"), Outcome::kDone);
  EXPECT_TRUE(a.HasVolume("pvc-u2"));
}

// A node busy with other creates (a slow disk, a hung nodevold) gets no
// more workers: a free claim goes to another node with room, one that
// must go there waits outside the workers without a failure or an event.
TEST(Provision, ANodeBusyWithCreatesIsAvoidedOrWaitedFor) {
  World w;
  NodeLoad load(1);
  FakeNode a("a"), b("b");
  w.view.Add(&a, "fast", 20 * GiB);  // the roomier one
  w.view.Add(&b, "fast", 10 * GiB);
  json pinned = Claim("p1", "1Gi", "later", {{"volume.kubernetes.io/selected-node", "a"}});
  w.Load({Claim("f1"), pinned}, {}, {Class(), WaitingClass("later")});
  w.ctx.load = &load;
  ASSERT_TRUE(load.TryAcquire("a"));  // another pass is waiting on a
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-f1"), Outcome::kDone);
  EXPECT_TRUE(b.HasVolume("pvc-f1"));
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-p1"), Outcome::kLater);
  EXPECT_FALSE(a.HasVolume("pvc-p1"));
  std::string node, pool;
  CapacityLedger::Kind kind;
  // Its selected node's bytes stay promised while it waits its turn: the
  // extender must not give them to the next pods of a burst (a trial's
  // reschedules: the node was full when the claim's turn came).
  ASSERT_TRUE(w.ledger.Find("p1", &node, &pool, &kind));
  EXPECT_EQ(kind, CapacityLedger::Kind::kSelected);
  EXPECT_EQ(node, "a");
  EXPECT_EQ(pool, "fast");
  auto reasons = w.api.EventReasons();
  EXPECT_EQ(std::count(reasons.begin(), reasons.end(), "ProvisioningFailed"), 0);
  EXPECT_EQ(std::count(reasons.begin(), reasons.end(), "Provisioning"), 1);  // f1's only
  load.Release("a");
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-p1"), Outcome::kDone);
  EXPECT_TRUE(a.HasVolume("pvc-p1"));
}

// A create on the selected node that fails without a definite "no room"
// is tried again there: the claim's bytes stay promised there meanwhile.
TEST(Provision, AFailedCreateOnTheSelectedNodeKeepsItsBytesPromised) {
  World w;
  FakeNode a("a");
  w.view.Add(&a, "fast", 20 * GiB);
  w.Load({Claim("p1", "1Gi", "later", {{"volume.kubernetes.io/selected-node", "a"}})}, {}, {WaitingClass("later")});
  a.CreateThenFail(grpc::StatusCode::DEADLINE_EXCEEDED);  // made or not: uncertain
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-p1"), Outcome::kRetry);
  std::string node, pool;
  CapacityLedger::Kind kind;
  ASSERT_TRUE(w.ledger.Find("p1", &node, &pool, &kind));
  EXPECT_EQ(kind, CapacityLedger::Kind::kSelected);
  EXPECT_EQ(node, "a");
}

// volumeMode Block: a raw block volume on the node and a Block CSI PV
// without fsType; refused, with nothing made, where it cannot work.
TEST(Provision, BlockClaimsGetARawBlockVolumeThroughCsiOnly) {
  World w;
  FakeNode a("a");
  w.view.Add(&a, "fast", 10 * GiB);
  json claim = Claim("b1");
  claim["spec"]["volumeMode"] = "Block";
  json flex = Class("flex");
  flex["parameters"]["volumeSource"] = "flexVolume";
  json typed = Class("typed");
  typed["parameters"]["fsType"] = "xfs";
  json flex_claim = Claim("b2", "1Gi", "flex"), typed_claim = Claim("b3", "1Gi", "typed"), rox = Claim("b4");
  flex_claim["spec"]["volumeMode"] = typed_claim["spec"]["volumeMode"] = rox["spec"]["volumeMode"] = "Block";
  rox["spec"]["accessModes"] = {"ReadOnlyMany"};
  w.Load({claim, flex_claim, typed_claim, rox}, {}, {Class(), flex, typed});
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-b1"), Outcome::kDone);
  EXPECT_TRUE(a.Volume("pvc-b1").block());
  json pv = w.api.Object(kPvs + "/pvc-b1");
  EXPECT_EQ(pv["spec"].value("volumeMode", ""), "Block");
  EXPECT_EQ(pv["spec"]["csi"].value("driver", ""), "nodevol.io");
  EXPECT_FALSE(pv["spec"]["csi"].contains("fsType"));
  for (const char* key : {"app/data-b2", "app/data-b3", "app/data-b4"})
    EXPECT_EQ(ProvisionClaim(w.ctx, key), Outcome::kGiveUp) << key;
  EXPECT_EQ(a.creates(), 1);
}

// A node whose nodevold serves no CSI (older, or --csi=off): the default
// class gets a flexVolume PV there, one that asks for CSI gets nothing.
TEST(Provision, ANodeWithoutCsiGetsFlexVolumePvsUnlessTheClassAsksCsi) {
  World w;
  FakeNode a("a");
  w.view.Add(&a, "fast", 10 * GiB);
  w.view.SetNoCsi("a");
  json asks = Class("asks");
  asks["parameters"]["volumeSource"] = "csi";
  w.Load({Claim("d1"), Claim("c1", "1Gi", "asks")}, {}, {Class(), asks});
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-d1"), Outcome::kDone);
  json pv = w.api.Object(kPvs + "/pvc-d1");
  EXPECT_TRUE(pv["spec"].contains("flexVolume"));
  EXPECT_FALSE(pv["spec"].contains("csi"));
  auto reasons = w.api.EventReasons();
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "FlexVolumeFallback"), reasons.end());
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-c1"), Outcome::kRetry);
  EXPECT_FALSE(a.HasVolume("pvc-c1"));
}

// A class made before the rename to nodevol.io still provisions (a class's
// provisioner field cannot be changed); the PV carries the new name, which
// deletion accepts like the old one.
TEST(Provision, AClassOfTheOldNameIsStillServed) {
  World w;
  FakeNode a("a");
  w.view.Add(&a, "fast", 10 * GiB);
  json cls = Class("old");
  cls["provisioner"] = "nodevol.io/provisioner";
  json claim = Claim("u0", "1Gi", "old", {{"volume.kubernetes.io/storage-provisioner", "nodevol.io/provisioner"}});
  w.Load({claim}, {}, {cls});
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-u0"), Outcome::kDone);
  EXPECT_TRUE(a.HasVolume("pvc-u0"));
  EXPECT_EQ(w.api.Object(kPvs + "/pvc-u0")["metadata"]["annotations"].value("pv.kubernetes.io/provisioned-by", ""),
            "nodevol.io");
  // Another provisioner's class is not ours.
  cls["provisioner"] = "other.io";
  claim = Claim("u9", "1Gi", "old", {{"volume.kubernetes.io/storage-provisioner", "other.io"}});
  World w2;
  w2.view.Add(&a, "fast", 10 * GiB);
  w2.Load({claim}, {}, {cls});
  EXPECT_EQ(ProvisionClaim(w2.ctx, "app/data-u9"), Outcome::kDone);
  EXPECT_FALSE(a.HasVolume("pvc-u9"));
}

// Item 2: DEADLINE_EXCEEDED after the volume was made on b; b's capacity
// now counts the volume, so placement alone would pick a. The retry must
// go back to b and make no second volume on a.
TEST(Provision, AnUncertainCreateStaysWithItsNode) {
  for (auto code : {grpc::StatusCode::DEADLINE_EXCEEDED, grpc::StatusCode::UNAVAILABLE}) {
    World w;
    FakeNode a("a"), b("b");
    w.view.Add(&a, "fast", 10 * GiB);
    w.view.Add(&b, "fast", 20 * GiB);
    w.Load({Claim("u2")});
    b.CreateThenFail(code);
    EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-u2"), Outcome::kRetry);
    ASSERT_TRUE(b.HasVolume("pvc-u2"));
    EXPECT_FALSE(w.api.Has(kPvs + "/pvc-u2"));
    // Written on the claim too, for a next leader that cannot reach b.
    json claim = w.api.Object("/api/v1/namespaces/app/persistentvolumeclaims/data-u2");
    EXPECT_EQ(claim["metadata"]["annotations"].value("nodevol.io/provisioning-node", ""), "b");
    w.view.SetFree("b", 5 * GiB);

    EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-u2"), Outcome::kDone);
    EXPECT_FALSE(a.HasVolume("pvc-u2")) << "a second volume was made on a";
    EXPECT_EQ(a.creates(), 0);
    EXPECT_EQ(w.api.Object(kPvs + "/pvc-u2")["metadata"]["annotations"].value("nodevol.io/node", ""), "b");
  }
}

// Item 2, after a failover: a new process (no memory of the attempt) reads
// the node from the claim's annotation.
TEST(Provision, TheRecordedNodeSurvivesARestart) {
  World w;
  FakeNode a("a"), b("b");
  w.view.Add(&a, "fast", 20 * GiB);
  w.view.Add(&b, "fast", 5 * GiB);
  v1::Volume v;
  v.set_name("pvc-u3");
  v.set_pool("fast");
  v.set_size_bytes(GiB);
  b.AddVolume(v);
  w.Load({Claim("u3", "1Gi", "fast", {{"nodevol.io/provisioning-node", "b"}})});
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-u3"), Outcome::kDone);
  EXPECT_EQ(a.creates(), 0);
  EXPECT_EQ(w.api.Object(kPvs + "/pvc-u3")["metadata"]["annotations"].value("nodevol.io/node", ""), "b");
}

// Volume pvc-<uid> made on `node` by an earlier process (another World),
// which then saved no PV (the next World does not load one).
void MadeBefore(FakeNode* node, const std::string& uid) {
  World before;
  before.view.Add(node, "fast", 20 * GiB);
  before.Load({Claim(uid)});
  ASSERT_EQ(ProvisionClaim(before.ctx, "app/data-" + uid), Outcome::kDone);
  ASSERT_TRUE(node->HasVolume("pvc-" + uid));
}

// A provisioner killed between CreateVolume and the PV save: the next
// leader (no memory, nothing on the claim) reads the volume from node b
// before placing the claim, and finishes it there instead of making a
// second volume on a (the roomier node).
TEST(Provision, ANewLeaderFinishesAVolumeFoundOnItsNode) {
  FakeNode a("a"), b("b");
  MadeBefore(&b, "u6");
  World w;  // the PV was never saved
  w.view.Add(&a, "fast", 20 * GiB);
  w.view.Add(&b, "fast", 5 * GiB);
  w.Load({Claim("u6")});
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-u6"), Outcome::kDone);
  EXPECT_EQ(a.creates(), 0) << "a second volume was made on a";
  EXPECT_EQ(w.api.Object(kPvs + "/pvc-u6")["metadata"]["annotations"].value("nodevol.io/node", ""), "b");
}

// What a node holds is only taken for the claim it was made for: the
// volume of a claim since made again under the same name (another uid)
// leaves placement alone.
TEST(Provision, ANewLeaderIgnoresVolumesOfOtherClaims) {
  FakeNode a("a"), b("b");
  MadeBefore(&b, "u7");
  json again = Claim("u8");
  again["metadata"]["name"] = "data-u7";  // data-u7 deleted and made again
  World w;
  w.view.Add(&a, "fast", 20 * GiB);
  w.view.Add(&b, "fast", 5 * GiB);
  w.Load({again});
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-u7"), Outcome::kDone);
  EXPECT_TRUE(a.HasVolume("pvc-u8"));
  EXPECT_EQ(b.creates(), 1);
}

// A node unreachable when the new leader starts is read once it is
// reachable, before a claim is placed again: from then on its volumes
// count (b has less room than a, so placement alone would choose a).
TEST(Provision, ANodeUnreachableAtStartIsReadLater) {
  FakeNode a("a"), b("b"), c("c");
  MadeBefore(&b, "u9");
  World w;
  w.view.Add(&a, "fast", 5 * GiB);
  w.view.Add(&b, "fast", 3 * GiB / 2);
  w.view.Add(&c, "fast", 1 * GiB);
  w.Load({Claim("u10", "2Gi"), Claim("u9")});
  w.view.SetReachable("b", false);
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-u10"), Outcome::kDone);
  EXPECT_FALSE(w.attempts.Seeded("b"));
  EXPECT_TRUE(w.attempts.Seeded("a"));
  w.view.SetReachable("b", true);
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-u9"), Outcome::kDone);
  EXPECT_TRUE(w.attempts.Seeded("b"));
  EXPECT_EQ(w.api.Object(kPvs + "/pvc-u9")["metadata"]["annotations"].value("nodevol.io/node", ""), "b");
  EXPECT_EQ(a.creates(), 1);  // u10 only
}

// A reachable node whose volumes cannot be read is not asked again by
// every pass, only after Attempts::kSeedRetry; the claim is placed
// meanwhile (a second copy there would be swept).
TEST(Provision, ANodeThatCannotListIsAskedAgainLater) {
  FakeNode a("a"), b("b");
  World w;
  w.view.Add(&a, "fast", 5 * GiB);
  w.view.Add(&b, "fast", 1 * GiB);
  w.Load({Claim("u11")});
  b.SetDown(true);  // reported reachable, answers nothing
  auto before = std::chrono::steady_clock::now();
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-u11"), Outcome::kDone);
  EXPECT_TRUE(a.HasVolume("pvc-u11"));
  EXPECT_FALSE(w.attempts.Seeded("b"));
  EXPECT_FALSE(w.attempts.SeedDue("b", std::chrono::steady_clock::now()));
  EXPECT_TRUE(w.attempts.SeedDue("b", before + Attempts::kSeedRetry + std::chrono::seconds(1)));
}

// Each failure in a row doubles the wait (10, 20, 40 s... up to 5 min), so
// a node that answers nothing stalls the passes less and less; a success
// ends it.
TEST(Provision, ANodeThatKeepsFailingToListIsAskedLessAndLessOften) {
  Attempts attempts;
  auto t = std::chrono::steady_clock::now();
  using std::chrono::seconds;
  attempts.SeedFailed("b", t);
  EXPECT_TRUE(attempts.SeedDue("b", t + seconds(10)));
  attempts.SeedFailed("b", t);
  EXPECT_FALSE(attempts.SeedDue("b", t + seconds(19)));
  EXPECT_TRUE(attempts.SeedDue("b", t + seconds(20)));
  attempts.SeedFailed("b", t);
  EXPECT_FALSE(attempts.SeedDue("b", t + seconds(39)));
  EXPECT_TRUE(attempts.SeedDue("b", t + seconds(40)));
  for (int i = 0; i < 20; ++i) attempts.SeedFailed("b", t);
  EXPECT_FALSE(attempts.SeedDue("b", t + seconds(299)));
  EXPECT_TRUE(attempts.SeedDue("b", t + Attempts::kSeedRetryMax));
  attempts.SetSeeded("b");
  EXPECT_FALSE(attempts.SeedDue("b", t + seconds(1000)));  // seeded: never again
}

// The recorded node cannot tell: wait for it, create nowhere else.
TEST(Provision, AnUnreachableRecordedNodeIsWaitedFor) {
  World w;
  FakeNode a("a"), b("b");
  w.view.Add(&a, "fast", 20 * GiB);
  w.view.Add(&b, "fast", 5 * GiB);
  b.SetDown(true);
  w.Load({Claim("u4", "1Gi", "fast", {{"nodevol.io/provisioning-node", "b"}})});
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-u4"), Outcome::kRetry);
  EXPECT_EQ(a.creates(), 0);
  EXPECT_FALSE(w.api.Has(kPvs + "/pvc-u4"));
}

// The recorded node says the volume does not exist: placed afresh.
TEST(Provision, ARecordedNodeWithoutTheVolumeFreesTheClaim) {
  World w;
  FakeNode a("a"), b("b");
  w.view.Add(&a, "fast", 20 * GiB);
  w.view.Add(&b, "fast", 5 * GiB);
  w.Load({Claim("u5", "1Gi", "fast", {{"nodevol.io/provisioning-node", "b"}})});
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-u5"), Outcome::kDone);
  EXPECT_TRUE(a.HasVolume("pvc-u5"));
  json claim = w.api.Object("/api/v1/namespaces/app/persistentvolumeclaims/data-u5");
  EXPECT_EQ(claim["metadata"]["annotations"].value("nodevol.io/provisioning-node", ""), "a");
}

// Item 2: the PV was saved meanwhile by another pass for another node;
// AlreadyExists is not our success: our copy goes, no success event.
TEST(Provision, AlreadyExistsForAnotherNodeIsNotASuccess) {
  World w;
  FakeNode a("a"), b("b");
  w.view.Add(&a, "fast", 20 * GiB);
  w.view.Add(&b, "fast", 5 * GiB);
  w.Load({Claim("u6")});
  a.OnCreate([&] { w.api.Put(kPvs + "/pvc-u6", PvFor("u6", "b")); });
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-u6"), Outcome::kDone);
  EXPECT_FALSE(a.HasVolume("pvc-u6"));
  auto reasons = w.api.EventReasons();
  EXPECT_EQ(std::find(reasons.begin(), reasons.end(), "ProvisioningSucceeded"), reasons.end());
  EXPECT_EQ(w.api.Object(kPvs + "/pvc-u6")["metadata"]["annotations"].value("nodevol.io/node", ""), "b");
}

// Item 3: the first POST is committed but the client sees a timeout, the
// retries fail too. The volume must stay under the PV that exists.
TEST(Provision, APvSaveWithAnUnknownOutcomeKeepsTheVolume) {
  World w;
  FakeNode a("a");
  w.view.Add(&a, "fast", 20 * GiB);
  w.Load({Claim("u7")});
  w.api.Script("POST", kPvs, kube::Result::NetworkError("timed out"), /*commit=*/true);
  w.api.Script("POST", kPvs, kube::Result::NetworkError("connection refused"));
  w.api.Script("POST", kPvs, kube::Result::NetworkError("connection refused"));
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-u7"), Outcome::kDone);
  EXPECT_TRUE(a.HasVolume("pvc-u7"));
  EXPECT_EQ(a.deletes(), 0);
  auto reasons = w.api.EventReasons();
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "ProvisioningSucceeded"), reasons.end());
}

// Item 3: the PV cannot be read back either: keep the volume, retry.
TEST(Provision, APvThatCannotBeReadBackKeepsTheVolume) {
  World w;
  FakeNode a("a");
  w.view.Add(&a, "fast", 20 * GiB);
  w.Load({Claim("u8")});
  for (int i = 0; i < 3; ++i) w.api.Script("POST", kPvs, kube::Result::NetworkError("connection refused"));
  w.api.Script("GET", kPvs + "/pvc-u8", kube::Result::NetworkError("connection refused"));
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-u8"), Outcome::kRetry);
  EXPECT_TRUE(a.HasVolume("pvc-u8"));
  json claim = w.api.Object("/api/v1/namespaces/app/persistentvolumeclaims/data-u8");
  EXPECT_EQ(claim["metadata"]["annotations"].value("nodevol.io/provisioning-node", ""), "a");
}

// A PV known not to be saved: the volume is cleaned up.
TEST(Provision, APvKnownNotSavedDeletesTheVolume) {
  World w;
  FakeNode a("a");
  w.view.Add(&a, "fast", 20 * GiB);
  w.Load({Claim("u9")});
  for (int i = 0; i < 3; ++i) w.api.Script("POST", kPvs, kube::Result::NetworkError("connection refused"));
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-u9"), Outcome::kRetry);
  EXPECT_FALSE(a.HasVolume("pvc-u9"));
}

// Item 1: a stopping controller abandons the PV save's pauses without
// deleting the volume (the next leader finishes it on the recorded node).
TEST(Provision, StoppingDuringThePvSaveKeepsTheVolume) {
  World w;
  FakeNode a("a");
  w.view.Add(&a, "fast", 20 * GiB);
  w.Load({Claim("u10")});
  w.ctx.options.pv_save_pause = std::chrono::hours(1);
  w.api.Script("POST", kPvs, kube::Result::NetworkError("connection refused"));
  w.stop.Set();
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-u10"), Outcome::kRetry);
  EXPECT_TRUE(a.HasVolume("pvc-u10"));
  json claim = w.api.Object("/api/v1/namespaces/app/persistentvolumeclaims/data-u10");
  EXPECT_EQ(claim["metadata"]["annotations"].value("nodevol.io/provisioning-node", ""), "a");
}

// Item 6: no room marks the claim as waiting for room (requeued on a
// capacity change); a bad parameter does not.
TEST(Provision, OnlyRoomFailuresWaitForCapacity) {
  World w;
  FakeNode a("a");
  w.view.Add(&a, "fast", GiB / 2);
  json bad = Class("bad");
  bad["parameters"]["colour"] = "red";
  w.Load({Claim("u11"), Claim("u12", "1Gi", "bad")}, {}, {Class(), bad});
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-u11"), Outcome::kRetry);
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-u12"), Outcome::kGiveUp);
  EXPECT_EQ(w.waiting.size(), 1u);
}

}  // namespace
}  // namespace nodevol::provisioner

namespace nodevol::provisioner {
namespace {

// Issue 15: a pod with two claims on a WaitForFirstConsumer class, both
// selected for one node.
struct TwoClaimPod {
  World w;
  FakeNode a{"a"}, b{"b"};
  static constexpr uint64_t MiB = uint64_t{1} << 20;
  const std::string claims = "/api/v1/namespaces/app/persistentvolumeclaims/";

  explicit TwoClaimPod(uint64_t a_free) {
    w.view.Add(&a, "fast", a_free);
    w.view.Add(&b, "fast", 1000 * MiB);
    json cls = Class();
    cls["volumeBindingMode"] = "WaitForFirstConsumer";
    json sel = {{"volume.kubernetes.io/selected-node", "a"}};
    w.Load({Claim("c1", "60Mi", "fast", sel), Claim("c2", "60Mi", "fast", sel)}, {}, {cls});
    json pod = {{"metadata", {{"namespace", "app"}, {"name", "p"}}},
                {"spec", {{"volumes", {{{"name", "one"}, {"persistentVolumeClaim", {{"claimName", "data-c1"}}}},
                                       {{"name", "two"}, {"persistentVolumeClaim", {{"claimName", "data-c2"}}}}}}}}};
    w.api.Put("/api/v1/namespaces/app/pods?fieldSelector=spec.nodeName%3D", {{"items", {pod}}});
  }
  bool Selected(const std::string& uid) {
    return w.api.Object(claims + "data-" + uid)["metadata"]["annotations"].contains(
        "volume.kubernetes.io/selected-node");
  }
};

TEST(ProvisionPod, ClaimsThatDoNotAllFitAreRescheduledTogether) {
  TwoClaimPod t(100 * TwoClaimPod::MiB);  // room for one 60 MiB claim, not two
  EXPECT_EQ(ProvisionClaim(t.w.ctx, "app/data-c1"), Outcome::kDone);
  EXPECT_FALSE(t.a.HasVolume("pvc-c1")) << "one volume of a pod that cannot fit: half-provisioned";
  EXPECT_EQ(t.a.creates(), 0);
  EXPECT_FALSE(t.Selected("c1"));
  EXPECT_FALSE(t.Selected("c2")) << "the pod's other claim still pins it to a";
  auto reasons = t.w.api.EventReasons();
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "ProvisioningFailed"), reasons.end());
}

TEST(ProvisionPod, TheFirstClaimPromisesTheOthersOnItsNode) {
  TwoClaimPod t(150 * TwoClaimPod::MiB);
  EXPECT_EQ(ProvisionClaim(t.w.ctx, "app/data-c1"), Outcome::kDone);
  EXPECT_TRUE(t.a.HasVolume("pvc-c1"));
  std::string node, pool;
  CapacityLedger::Kind kind;
  ASSERT_TRUE(t.w.ledger.Find("c2", &node, &pool, &kind));
  EXPECT_EQ(node, "a");
  EXPECT_EQ(kind, CapacityLedger::Kind::kSelected);
  // A claim of another pod now sees a's room without c2's 60 MiB.
  uint64_t room = 0;
  for (const auto& r : t.w.ledger.Rooms({"c1"}))
    if (r.seen.node == "a") room = r.room();
  EXPECT_EQ(room, 90 * TwoClaimPod::MiB);
  EXPECT_EQ(ProvisionClaim(t.w.ctx, "app/data-c2"), Outcome::kDone);
  EXPECT_TRUE(t.a.HasVolume("pvc-c2"));
}

}  // namespace
}  // namespace nodevol::provisioner
