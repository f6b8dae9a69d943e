// The snapshotter's part over VolumeSnapshotContents, against a fake
// apiserver and fake nodevolds (controller/fakes_test.h).
#include "snapshots/content.h"

#include <gtest/gtest.h>

#include "controller/fakes_test.h"
#include "snapshots/names.h"
#include "base/size.h"

namespace nodevol::provisioner {
namespace {

using namespace testing;
using Outcome = Workers::Outcome;
const std::string kContents = "/apis/snapshot.storage.k8s.io/v1/volumesnapshotcontents/";

json SourcePv(const std::string& name, const std::string& node) {
  return {{"metadata", {{"name", name}, {"annotations", {{"nodevol.io/node", node}}}}},
          {"spec", {{"csi", {{"driver", "nodevol.io"}, {"volumeHandle", name}}}}}};
}

json DynamicContent(const std::string& name, const std::string& volume, const std::string& cls = "snaps") {
  return {{"metadata", {{"name", name}, {"resourceVersion", "7"}, {"finalizers", {kContentFinalizer}}}},
          {"spec", {{"driver", "nodevol.io"},
                    {"deletionPolicy", "Delete"},
                    {"volumeSnapshotClassName", cls},
                    {"source", {{"volumeHandle", volume}}},
                    {"volumeSnapshotRef", {{"namespace", "app"}, {"name", "snap"}, {"uid", "u-" + name}}}}}};
}

// A ready snapshot of pvc-1 as nodevold reports it.
v1::Snapshot ReadySnapshot(const std::string& name) {
  v1::Snapshot s;
  s.set_name(name);
  s.set_source_volume("pvc-1");
  s.set_size_bytes(GiB);
  s.set_state(v1::VOLUME_STATE_READY);
  s.set_created_unix(1700000000);
  return s;
}

struct SnapWorld : World {
  FakeNode a{"a"};
  std::unique_ptr<kube::Informer> contents;

  SnapWorld() {
    view.Add(&a, "thin", 10 * GiB);
    v1::Volume v;
    v.set_name("pvc-1");
    v.set_pool("thin");
    v.set_size_bytes(GiB);
    a.AddVolume(v);
    Load({}, {SourcePv("pvc-1", "a")});
    api.Put("/apis/snapshot.storage.k8s.io/v1/volumesnapshotclasses/snaps",
            {{"metadata", {{"name", "snaps"}}}, {"driver", "nodevol.io"}, {"deletionPolicy", "Delete"}});
  }
  // The content as the apiserver has it now, into the cache, then one pass.
  Outcome Sync(const std::string& name) {
    contents = StaticCache({api.Object(kContents + name)});
    return SyncContent(ctx, contents.get(), name);
  }
};

TEST(SnapshotContent, ADynamicContentGetsItsSnapshotAndStatus) {
  SnapWorld w;
  w.api.Put(kContents + "c1", DynamicContent("c1", "pvc-1"));
  EXPECT_EQ(w.Sync("c1"), Outcome::kDone);
  EXPECT_TRUE(w.a.HasSnapshot("snapshot-u-c1"));
  json c = w.api.Object(kContents + "c1");
  EXPECT_EQ(c["status"].value("snapshotHandle", ""), "a/snapshot-u-c1");
  EXPECT_TRUE(c["status"].value("readyToUse", false));
  EXPECT_EQ(c["status"].value("restoreSize", int64_t{0}), int64_t(GiB));
  EXPECT_EQ(c["status"].value("creationTime", int64_t{0}), int64_t{1700000000} * 1000000000);
  // The being-created annotation was set before the call and is gone after.
  bool annotated = false;
  for (const auto& call : w.api.Calls())
    if (call.verb == "PATCH" && call.body.dump().find(kAnnBeingCreated) != std::string::npos &&
        call.body["metadata"]["annotations"][kAnnBeingCreated] == "yes")
      annotated = true;
  EXPECT_TRUE(annotated);
  EXPECT_FALSE(c["metadata"].value("annotations", json::object()).contains(kAnnBeingCreated));
  // A second pass over the ready content asks the node nothing.
  EXPECT_EQ(w.Sync("c1"), Outcome::kDone);
  EXPECT_EQ(w.a.snapshot_creates(), 1);
}

TEST(SnapshotContent, ARefusalIsAnErrorInStatusAndAnEventAndLeavesNoAnnotation) {
  SnapWorld w;
  w.api.Put(kContents + "c2", DynamicContent("c2", "pvc-1"));
  w.a.FailNextSnapshot(grpc::StatusCode::FAILED_PRECONDITION, "pool thin takes no snapshots");
  EXPECT_EQ(w.Sync("c2"), Outcome::kRetry);
  json c = w.api.Object(kContents + "c2");
  EXPECT_FALSE(c["status"].value("readyToUse", true));
  EXPECT_NE(c["status"]["error"].value("message", "").find("takes no snapshots"), std::string::npos);
  EXPECT_FALSE(c["metadata"].value("annotations", json::object()).contains(kAnnBeingCreated));
  auto reasons = w.api.EventReasons();
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "SnapshotCreationFailed"), reasons.end());
  EXPECT_FALSE(w.a.HasSnapshot("snapshot-u-c2"));
}

// A create that timed out keeps the being-created annotation, and where
// it went. issue 69 item 5: when the source PV was gone by the next pass, the pass
// failed before the annotation was settled, for ever: the finalizer
// stayed, the node's snapshot leaked, a namespace deletion hung.
TEST(SnapshotContent, AnUncertainCreateIsSettledAfterItsSourcePvIsGone) {
  for (bool made : {true, false}) {
    SCOPED_TRACE(made ? "the timed-out create made the snapshot" : "it made nothing");
    SnapWorld w;
    w.api.Put(kContents + "c6", DynamicContent("c6", "pvc-1"));
    w.a.FailNextSnapshot(grpc::StatusCode::DEADLINE_EXCEEDED, "took too long");
    ASSERT_EQ(w.Sync("c6"), Outcome::kRetry);
    json c = w.api.Object(kContents + "c6");
    ASSERT_EQ(c["metadata"]["annotations"].value(kAnnBeingCreated, ""), "yes");
    EXPECT_EQ(c["metadata"]["annotations"].value(kAnnSnapshotNode, ""), "a");
    if (made) w.a.AddSnapshot(ReadySnapshot("snapshot-u-c6"));
    w.Load({}, {});  // the source PV is gone
    // The snapshot-controller then lets the content go.
    c = w.api.Object(kContents + "c6");
    c["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z";
    c["metadata"]["annotations"][kAnnBeingDeleted] = "yes";
    w.api.Put(kContents + "c6", c);
    Outcome last = Outcome::kRetry;
    for (int pass = 0; pass < 20 && last != Outcome::kDone; ++pass) last = w.Sync("c6");
    EXPECT_EQ(last, Outcome::kDone);
    c = w.api.Object(kContents + "c6");
    EXPECT_FALSE(c["metadata"].value("annotations", json::object()).contains(kAnnBeingCreated));
    EXPECT_EQ(c["metadata"].value("finalizers", json::array()), json::array()) << "the finalizer stayed";
    EXPECT_FALSE(w.a.HasSnapshot("snapshot-u-c6")) << "the node's snapshot leaked";
  }
}

// A content an older provisioner annotated names no node: every node
// that reports pools is asked.
TEST(SnapshotContent, AnUncertainCreateOfAnOlderProvisionerIsLookedForOnEveryNode) {
  SnapWorld w;
  json content = DynamicContent("c8", "pvc-1");
  content["metadata"]["annotations"][kAnnBeingCreated] = "yes";
  w.api.Put(kContents + "c8", content);
  v1::Snapshot s = ReadySnapshot("snapshot-u-c8");
  w.a.AddSnapshot(s);
  w.Load({}, {});
  EXPECT_EQ(w.Sync("c8"), Outcome::kDone);
  json c = w.api.Object(kContents + "c8");
  EXPECT_EQ(c["status"].value("snapshotHandle", ""), "a/snapshot-u-c8");
  EXPECT_FALSE(c["metadata"].value("annotations", json::object()).contains(kAnnBeingCreated));
  EXPECT_EQ(w.a.snapshot_creates(), 0);
}

// Asked everywhere, two nodes report the snapshot: one of them lies (a
// compromised node would take the restores), so neither is believed.
TEST(SnapshotContent, TwoNodesClaimingOneSnapshotAreNeitherBelieved) {
  SnapWorld w;
  FakeNode b{"b"};
  w.view.Add(&b, "thin", 10 * GiB);
  json content = DynamicContent("c9", "pvc-1");
  content["metadata"]["annotations"][kAnnBeingCreated] = "yes";
  w.api.Put(kContents + "c9", content);
  v1::Snapshot s = ReadySnapshot("snapshot-u-c9");
  w.a.AddSnapshot(s);
  b.AddSnapshot(s);
  w.Load({}, {});
  EXPECT_EQ(w.Sync("c9"), Outcome::kRetry);
  json c = w.api.Object(kContents + "c9");
  EXPECT_EQ(c["status"].value("snapshotHandle", ""), "");
  EXPECT_EQ(c["metadata"]["annotations"].value(kAnnBeingCreated, ""), "yes");
  EXPECT_NE(c["status"]["error"].value("message", "").find("reported by nodes"), std::string::npos);
}

// The node the create went to was removed from the cluster for good: it
// holds nothing any more, and the content must not wait for it for ever.
TEST(SnapshotContent, ANodeDeletedForGoodHoldsNothing) {
  for (bool node_exists : {false, true}) {
    SCOPED_TRACE(node_exists ? "the Node object exists" : "the Node object is gone");
    SnapWorld w;
    json content = DynamicContent("c10", "pvc-1");
    content["metadata"]["annotations"][kAnnBeingCreated] = "yes";
    content["metadata"]["annotations"][kAnnSnapshotNode] = "z";
    w.api.Put(kContents + "c10", content);
    if (node_exists) w.api.Put("/api/v1/nodes/z", {{"metadata", {{"name", "z"}}}});
    w.Load({}, {});
    EXPECT_EQ(w.Sync("c10"), Outcome::kRetry);
    json c = w.api.Object(kContents + "c10");
    EXPECT_EQ(c["metadata"].value("annotations", json::object()).contains(kAnnBeingCreated), node_exists);
  }
}

TEST(SnapshotContent, AnUncertainCreateStaysUncertainWhileItsNodeIsDown) {
  SnapWorld w;
  w.api.Put(kContents + "c7", DynamicContent("c7", "pvc-1"));
  w.a.FailNextSnapshot(grpc::StatusCode::UNAVAILABLE, "connection reset");
  ASSERT_EQ(w.Sync("c7"), Outcome::kRetry);
  w.Load({}, {});
  w.a.SetDown(true);
  EXPECT_EQ(w.Sync("c7"), Outcome::kRetry);
  json c = w.api.Object(kContents + "c7");
  EXPECT_EQ(c["metadata"]["annotations"].value(kAnnBeingCreated, ""), "yes") << "dropped while the node may hold it";
  EXPECT_NE(c["status"]["error"].value("message", "").find("did not answer"), std::string::npos)
      << c["status"].dump();
}

TEST(SnapshotContent, BadInputIsRefusedWithNothingMade) {
  SnapWorld w;
  w.api.Put("/apis/snapshot.storage.k8s.io/v1/volumesnapshotclasses/odd",
            {{"metadata", {{"name", "odd"}}}, {"driver", "nodevol.io"}, {"parameters", {{"speed", "fast"}}}});
  w.api.Put(kContents + "unknown-volume", DynamicContent("unknown-volume", "pvc-nope"));
  w.api.Put(kContents + "odd-class", DynamicContent("odd-class", "pvc-1", "odd"));
  w.api.Put(kContents + "no-class", DynamicContent("no-class", "pvc-1", "missing"));
  for (const char* name : {"unknown-volume", "odd-class", "no-class"}) {
    EXPECT_EQ(w.Sync(name), Outcome::kRetry) << name;
    json c = w.api.Object(kContents + name);
    EXPECT_FALSE(c["status"]["error"].value("message", "").empty()) << name;
  }
  EXPECT_EQ(w.a.snapshot_creates(), 0);
  EXPECT_NE(w.api.Object(kContents + "odd-class")["status"]["error"].value("message", "").find("\"speed\""),
            std::string::npos);
}

TEST(SnapshotContent, AnotherDriversContentIsLeftAlone) {
  SnapWorld w;
  json c = DynamicContent("c4", "pvc-1");
  c["spec"]["driver"] = "ebs.csi.aws.com";
  w.api.Put(kContents + "c4", c);
  EXPECT_EQ(w.Sync("c4"), Outcome::kDone);
  EXPECT_EQ(w.api.Writes("volumesnapshotcontents"), 0);
  EXPECT_EQ(w.a.snapshot_creates(), 0);
}

TEST(SnapshotContent, DeletionFollowsThePolicyThenDropsTheFinalizer) {
  for (std::string policy : {"Delete", "Retain"}) {
    SnapWorld w;
    w.api.Put(kContents + "c5", DynamicContent("c5", "pvc-1"));
    ASSERT_EQ(w.Sync("c5"), Outcome::kDone);
    ASSERT_TRUE(w.a.HasSnapshot("snapshot-u-c5"));
    json c = w.api.Object(kContents + "c5");
    c["metadata"]["deletionTimestamp"] = "2026-11-27T00:00:00Z";
    c["metadata"]["annotations"][kAnnBeingDeleted] = "yes";
    c["spec"]["deletionPolicy"] = policy;
    w.api.Put(kContents + "c5", c);
    EXPECT_EQ(w.Sync("c5"), Outcome::kDone) << policy;
    EXPECT_EQ(w.a.HasSnapshot("snapshot-u-c5"), policy == "Retain") << policy;
    json after = w.api.Object(kContents + "c5");
    EXPECT_TRUE(after["metadata"]["finalizers"].empty()) << policy;
  }
}

TEST(SnapshotContent, ADeletingContentWaitsForTheSnapshotController) {
  SnapWorld w;
  json c = DynamicContent("c6", "pvc-1");
  c["metadata"]["deletionTimestamp"] = "2026-11-27T00:00:00Z";
  c["status"] = {{"snapshotHandle", "a/snapshot-u-c6"}, {"readyToUse", true}};
  w.api.Put(kContents + "c6", c);
  w.a.AddSnapshot([] {
    v1::Snapshot s;
    s.set_name("snapshot-u-c6");
    return s;
  }());
  EXPECT_EQ(w.Sync("c6"), Outcome::kDone);
  EXPECT_TRUE(w.a.HasSnapshot("snapshot-u-c6"));
  EXPECT_FALSE(w.api.Object(kContents + "c6")["metadata"]["finalizers"].empty());
}

// Seen in k8s_vm_snapshot: a thick-pool snapshot (every create refused)
// deleted while a pass was running. The next pass saw it deleting with
// its own being-created still in the cache, created again, failed, and the
// content kept its finalizer for ever. Deleting: no create, ever.
TEST(SnapshotContent, ADeletingContentIsNeverCreatedOnlySettled) {
  SnapWorld w;
  json c = DynamicContent("c7", "pvc-1");
  c["metadata"]["deletionTimestamp"] = "2026-12-04T20:14:25Z";
  c["metadata"]["annotations"] = {{kAnnBeingDeleted, "yes"}, {kAnnBeingCreated, "yes"}, {kAnnSnapshotNode, "a"}};
  w.api.Put(kContents + "c7", c);
  EXPECT_EQ(w.Sync("c7"), Outcome::kDone);
  EXPECT_EQ(w.a.snapshot_creates(), 0) << "a deleting content was snapshotted";
  json after = w.api.Object(kContents + "c7");
  EXPECT_EQ(after["metadata"].value("finalizers", json::array()), json::array()) << "the finalizer stayed";
  EXPECT_FALSE(after["metadata"].value("annotations", json::object()).contains(kAnnBeingCreated));
}

// The same with the snapshot half made on the node (nodevold stopped
// mid-create: "CreateSnapshot finishes it, DeleteSnapshot removes it"):
// it is deleted there, not waited for.
TEST(SnapshotContent, ADeletingContentsHalfMadeSnapshotIsDeleted) {
  SnapWorld w;
  v1::Snapshot half = ReadySnapshot("snapshot-u-c8");
  half.set_state(v1::VOLUME_STATE_CREATING);
  w.a.AddSnapshot(half);
  json c = DynamicContent("c8", "pvc-1");
  c["metadata"]["deletionTimestamp"] = "2026-12-04T20:14:25Z";
  c["metadata"]["annotations"] = {{kAnnBeingDeleted, "yes"}, {kAnnBeingCreated, "yes"}, {kAnnSnapshotNode, "a"}};
  w.api.Put(kContents + "c8", c);
  EXPECT_EQ(w.Sync("c8"), Outcome::kDone);
  EXPECT_FALSE(w.a.HasSnapshot("snapshot-u-c8")) << "the half-made snapshot was left on the node";
  EXPECT_EQ(w.a.snapshot_creates(), 0);
  EXPECT_EQ(w.api.Object(kContents + "c8")["metadata"].value("finalizers", json::array()), json::array());
}

TEST(SnapshotContent, AStaticContentIsCheckedOnItsNode) {
  SnapWorld w;
  v1::Snapshot s;
  s.set_name("kept");
  s.set_size_bytes(3 * GiB);
  s.set_state(v1::VOLUME_STATE_READY);
  s.set_created_unix(1700000100);
  w.a.AddSnapshot(s);
  json ok = {{"metadata", {{"name", "static-ok"}}},
             {"spec", {{"driver", "nodevol.io"}, {"deletionPolicy", "Retain"}, {"source", {{"snapshotHandle", "a/kept"}}},
                       {"volumeSnapshotRef", {{"namespace", "app"}, {"name", "s"}}}}}};
  json missing = ok, bad = ok;
  missing["metadata"]["name"] = "static-missing";
  missing["spec"]["source"]["snapshotHandle"] = "a/gone";
  bad["metadata"]["name"] = "static-bad";
  bad["spec"]["source"]["snapshotHandle"] = "kept";
  w.api.Put(kContents + "static-ok", ok);
  w.api.Put(kContents + "static-missing", missing);
  w.api.Put(kContents + "static-bad", bad);
  EXPECT_EQ(w.Sync("static-ok"), Outcome::kDone);
  json c = w.api.Object(kContents + "static-ok");
  EXPECT_TRUE(c["status"].value("readyToUse", false));
  EXPECT_EQ(c["status"].value("restoreSize", int64_t{0}), int64_t(3 * GiB));
  EXPECT_EQ(w.Sync("static-missing"), Outcome::kRetry);
  EXPECT_FALSE(w.api.Object(kContents + "static-missing")["status"].value("readyToUse", true));
  EXPECT_EQ(w.Sync("static-bad"), Outcome::kRetry);
  EXPECT_NE(w.api.Object(kContents + "static-bad")["status"]["error"].value("message", "").find("<node>/<snapshot"),
            std::string::npos);
}

}  // namespace
}  // namespace nodevol::provisioner
