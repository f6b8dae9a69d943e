// Restores and clones: a claim with a data source is made from it on the
// node it lives on, or refused with a reason, with nothing made elsewhere.
#include "controller/data_source.h"

#include <gtest/gtest.h>

#include "controller/fakes_test.h"
#include "controller/pod_claims.h"
#include "controller/provision.h"
#include "base/size.h"

namespace nodevol::provisioner {
namespace {

using namespace testing;
using Outcome = Workers::Outcome;
const std::string kSnaps = "/apis/snapshot.storage.k8s.io/v1";

json ClaimFromSnapshot(const std::string& uid, const std::string& snap, const std::string& size = "2Gi") {
  json c = Claim(uid, size);
  c["spec"]["dataSource"] = {{"apiGroup", "snapshot.storage.k8s.io"}, {"kind", "VolumeSnapshot"}, {"name", snap}};
  c["spec"]["dataSourceRef"] = c["spec"]["dataSource"];
  return c;
}

// A ready VolumeSnapshot app/<name> bound to content snapcontent-<name>
// with handle <node>/snapshot-<name>.
void PutSnapshot(World& w, const std::string& name, const std::string& node, const std::string& driver = "nodevol.io",
                 bool ready = true) {
  w.api.Put(kSnaps + "/namespaces/app/volumesnapshots/" + name,
            {{"metadata", {{"namespace", "app"}, {"name", name}, {"uid", "vs-" + name}}},
             {"status", {{"readyToUse", ready}, {"boundVolumeSnapshotContentName", "snapcontent-" + name}}}});
  w.api.Put(kSnaps + "/volumesnapshotcontents/snapcontent-" + name,
            {{"metadata", {{"name", "snapcontent-" + name}}},
             {"spec", {{"driver", driver},
                       {"deletionPolicy", "Delete"},
                       {"volumeSnapshotRef", {{"namespace", "app"}, {"name", name}, {"uid", "vs-" + name}}}}},
             {"status", {{"snapshotHandle", node + "/snapshot-" + name}, {"readyToUse", ready},
                         {"restoreSize", int64_t(2 * GiB)}}}});
}

TEST(DataSource, ARestoreIsMadeFromTheSnapshotOnItsNode) {
  World w;
  FakeNode a("a"), b("b");
  w.view.Add(&a, "fast", 10 * GiB);
  w.view.Add(&b, "fast", 50 * GiB);  // roomier, but the snapshot is on a
  w.Load({ClaimFromSnapshot("r1", "before")});
  PutSnapshot(w, "before", "a");
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-r1"), Outcome::kDone);
  EXPECT_TRUE(a.HasVolume("pvc-r1"));
  EXPECT_FALSE(b.HasVolume("pvc-r1"));
  EXPECT_EQ(a.last_create().from_snapshot(), "snapshot-before");
  EXPECT_EQ(a.last_create().from_volume(), "");
  EXPECT_TRUE(w.api.Has("/api/v1/persistentvolumes/pvc-r1"));
}

TEST(DataSource, AClaimSmallerThanTheSnapshotIsRefused) {
  World w;
  FakeNode a("a");
  w.view.Add(&a, "fast", 10 * GiB);
  w.Load({ClaimFromSnapshot("r2", "before", "1Gi")});
  PutSnapshot(w, "before", "a");
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-r2"), Outcome::kGiveUp);
  EXPECT_EQ(a.creates(), 0);
  auto reasons = w.api.EventReasons();
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "ProvisioningFailed"), reasons.end());
}

TEST(DataSource, AnotherDriversSnapshotIsRefusedAndANotReadyOneWaitedFor) {
  World w;
  FakeNode a("a");
  w.view.Add(&a, "fast", 10 * GiB);
  w.Load({ClaimFromSnapshot("r3", "theirs"), ClaimFromSnapshot("r4", "later")});
  PutSnapshot(w, "theirs", "a", "ebs.csi.aws.com");
  PutSnapshot(w, "later", "a", "nodevol.io", false);
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-r3"), Outcome::kGiveUp);
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-r4"), Outcome::kRetry);
  EXPECT_EQ(a.creates(), 0);
  ClaimView c;
  ASSERT_TRUE(ParseClaim(ClaimFromSnapshot("r3", "theirs"), &c).ok());
  VolumeSource src;
  Status st = ResolveDataSource(w.ctx, c, &src);
  EXPECT_NE(st.message().find("driver ebs.csi.aws.com"), std::string::npos) << st.message();
}

TEST(DataSource, AVolumeModeChangeIsRefused) {
  World w;
  FakeNode a("a");
  w.view.Add(&a, "fast", 10 * GiB);
  w.Load({ClaimFromSnapshot("m1", "raw")});
  PutSnapshot(w, "raw", "a");
  json content = w.api.Object(kSnaps + "/volumesnapshotcontents/snapcontent-raw");
  content["spec"]["sourceVolumeMode"] = "Block";
  w.api.Put(kSnaps + "/volumesnapshotcontents/snapcontent-raw", content);
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-m1"), Outcome::kGiveUp);
  EXPECT_EQ(a.creates(), 0);
}

TEST(DataSource, AMissingSnapshotIsWaitedForAndAPopulatorsKindIgnored) {
  World w;
  FakeNode a("a");
  w.view.Add(&a, "fast", 10 * GiB);
  json pop = Claim("r6");
  pop["spec"]["dataSourceRef"] = {{"apiGroup", "populators.example.com"}, {"kind", "Dataset"}, {"name", "x"}};
  w.Load({ClaimFromSnapshot("r5", "nope"), pop});
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-r5"), Outcome::kRetry);
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-r6"), Outcome::kDone);
  EXPECT_EQ(a.creates(), 0);
  EXPECT_FALSE(w.api.Has("/api/v1/persistentvolumes/pvc-r6"));
}

TEST(DataSource, WaitForFirstConsumerOnAnotherNodeGivesTheSchedulerTheChoiceBack) {
  World w;
  FakeNode a("a"), b("b");
  w.view.Add(&a, "fast", 10 * GiB);
  w.view.Add(&b, "fast", 10 * GiB);
  json cls = Class();
  cls["volumeBindingMode"] = "WaitForFirstConsumer";
  json claim = ClaimFromSnapshot("r7", "before");
  claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] = "b";
  w.Load({claim}, {}, {cls});
  PutSnapshot(w, "before", "a");
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-r7"), Outcome::kDone);
  EXPECT_EQ(a.creates() + b.creates(), 0);
  json after = w.api.Object("/api/v1/namespaces/app/persistentvolumeclaims/data-r7");
  EXPECT_FALSE(after["metadata"]["annotations"].contains("volume.kubernetes.io/selected-node"));
}

TEST(DataSource, TheExtenderSeesWhereARestoreMustGo) {
  World w;
  FakeNode a("a");
  w.view.Add(&a, "fast", 10 * GiB);
  json cls = Class();
  cls["volumeBindingMode"] = "WaitForFirstConsumer";
  w.Load({ClaimFromSnapshot("p1", "before"), Claim("p2")}, {}, {cls});
  PutSnapshot(w, "before", "a");
  auto pending = PendingPodClaims(w.ctx, "app", {"data-p1", "data-p2"}).pending;
  ASSERT_EQ(pending.size(), 2u);
  EXPECT_EQ(pending[0].node, "a");
  EXPECT_EQ(pending[0].source, "VolumeSnapshot app/before");
  EXPECT_EQ(pending[1].node, "");
}

TEST(DataSource, ACloneIsMadeFromTheSourceClaimsVolumeOnItsNode) {
  World w;
  FakeNode a("a"), b("b");
  w.view.Add(&a, "fast", 10 * GiB);
  w.view.Add(&b, "fast", 50 * GiB);
  json src = Claim("s1", "1Gi");
  src["spec"]["volumeName"] = "pvc-s1";
  json pv = {{"metadata", {{"name", "pvc-s1"},
                           {"annotations", {{"pv.kubernetes.io/provisioned-by", "nodevol.io"},
                                            {"nodevol.io/node", "a"}, {"nodevol.io/backend", "lvm"}}}}},
             {"spec", {{"capacity", {{"storage", "1Gi"}}},
                       {"claimRef", {{"namespace", "app"}, {"name", "data-s1"}, {"uid", "s1"}}}}}};
  json clone = Claim("c1", "1Gi");
  // The apiserver sends a core kind's apiGroup as null.
  clone["spec"]["dataSource"] = {{"apiGroup", nullptr}, {"kind", "PersistentVolumeClaim"}, {"name", "data-s1"}};
  clone["spec"]["dataSourceRef"] = clone["spec"]["dataSource"];
  json other_class = Claim("c2", "1Gi", "slow");
  other_class["spec"]["dataSource"] = clone["spec"]["dataSource"];
  w.Load({src, clone, other_class}, {pv}, {Class(), Class("slow", "slow")});
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-c1"), Outcome::kDone);
  EXPECT_TRUE(a.HasVolume("pvc-c1"));
  EXPECT_EQ(a.last_create().from_volume(), "pvc-s1");
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-c2"), Outcome::kGiveUp);
  EXPECT_FALSE(a.HasVolume("pvc-c2"));
  EXPECT_FALSE(b.HasVolume("pvc-c2"));
}

// A claim's spec.volumeName is its author's to write: a Pending "bait"
// claim naming another namespace's PV, and a clone of the bait, copied the
// victim's data (issue 69, item 1). Only a PV whose claimRef names the
// claim back is the claim's volume.
TEST(DataSource, ACloneOfABaitClaimNamingAnotherNamespacesPvIsRefused) {
  World w;
  FakeNode a("a");
  w.view.Add(&a, "fast", 10 * GiB);
  json victim_pv = {{"metadata", {{"name", "pvc-v1"},
                                  {"annotations", {{"pv.kubernetes.io/provisioned-by", "nodevol.io"},
                                                   {"nodevol.io/node", "a"}, {"nodevol.io/backend", "lvm"}}}}},
                    {"spec", {{"capacity", {{"storage", "1Gi"}}},
                              {"claimRef", {{"namespace", "secret-ns"}, {"name", "data-v1"}, {"uid", "v1"}}}}}};
  json bait = Claim("bait", "1Gi");
  bait["spec"]["volumeName"] = "pvc-v1";  // Pending: the PV is another's
  json clone = Claim("c1", "1Gi");
  clone["spec"]["dataSource"] = {{"apiGroup", nullptr}, {"kind", "PersistentVolumeClaim"}, {"name", "data-bait"}};
  clone["spec"]["dataSourceRef"] = clone["spec"]["dataSource"];
  w.Load({bait, clone}, {victim_pv}, {Class()});
  EXPECT_EQ(ProvisionClaim(w.ctx, "app/data-c1"), Outcome::kGiveUp);
  EXPECT_FALSE(a.HasVolume("pvc-c1")) << "the victim's volume was copied";
  bool said = false;
  for (const auto& e : w.api.Calls())
    if (e.verb == "POST" && e.path.find("/events") != std::string::npos &&
        e.body.value("message", "").find("bound to claim secret-ns/data-v1") != std::string::npos)
      said = true;
  EXPECT_TRUE(said) << "the claim's event says why";
}

}  // namespace
}  // namespace nodevol::provisioner
