// The orphan sweep's and the volume controller's decisions (issue 26 items
// 2 and 7) against a fake apiserver and fake nodevolds.
#include "controller/orphans.h"

#include <gtest/gtest.h>

#include "controller/delete.h"
#include "controller/fakes_test.h"
#include "base/size.h"

namespace nodevol::provisioner {
namespace {

using namespace testing;

v1::Volume Vol(const std::string& uid, const std::string& reclaim = "Delete", const std::string& backend = "lvm") {
  v1::Volume v;
  v.set_name("pvc-" + uid);
  v.set_pool("fast");
  v.set_backend(backend);
  v.set_created_unix(1);
  (*v.mutable_parameters())["nodevol.io/provisioner"] = "nodevol.io";
  (*v.mutable_parameters())["nodevol.io/reclaim-policy"] = reclaim;
  (*v.mutable_parameters())["nodevol.io/pvc-namespace"] = "app";
  (*v.mutable_parameters())["nodevol.io/pvc-name"] = "data-" + uid;
  return v;
}

json Pv(const std::string& uid, const std::string& node, const std::string& reclaim = "Delete",
        const std::string& phase = "Bound", const std::string& backend = "lvm") {
  return {{"kind", "PersistentVolume"},
          {"apiVersion", "v1"},
          {"metadata", {{"name", "pvc-" + uid}, {"uid", "pv-" + uid}, {"resourceVersion", "9"},
                        {"annotations", {{"pv.kubernetes.io/provisioned-by", "nodevol.io"},
                                         {"nodevol.io/node", node}, {"nodevol.io/pool", "fast"},
                                         {"nodevol.io/backend", backend}}}}},
          {"spec", {{"claimRef", {{"namespace", "app"}, {"name", "data-" + uid}, {"uid", uid}}},
                    {"persistentVolumeReclaimPolicy", reclaim}}},
          {"status", {{"phase", phase}}}};
}

// Item 2: a second copy on a node its PV does not name is an orphan, under
// either reclaim policy; the copy the PV names, and NFS volumes of the
// same pool (one directory for all nodes), are not.
TEST(Orphans, ACopyOnANodeThePvDoesNotNameIsSwept) {
  World w;
  FakeNode a("a"), b("b"), n1("n1", "nfs"), n2("n2", "nfs");
  w.view.Add(&a, "fast", 10 * GiB);
  w.view.Add(&b, "fast", 10 * GiB);
  w.view.Add(&n1, "fast", 10 * GiB, "nfs");
  w.view.Add(&n2, "fast", 10 * GiB, "nfs");
  a.AddVolume(Vol("d1"));
  b.AddVolume(Vol("d1"));
  a.AddVolume(Vol("r1", "Retain"));
  b.AddVolume(Vol("r1", "Retain"));
  n1.AddVolume(Vol("f1", "Delete", "nfs"));
  n2.AddVolume(Vol("f1", "Delete", "nfs"));
  w.Load({Claim("d1"), Claim("r1"), Claim("f1")},
         {Pv("d1", "b"), Pv("r1", "b", "Retain"), Pv("f1", "n1", "Delete", "Bound", "nfs")});
  auto gone = SweepOrphans(w.ctx, std::chrono::seconds(60));
  EXPECT_FALSE(a.HasVolume("pvc-d1"));
  EXPECT_TRUE(b.HasVolume("pvc-d1"));
  EXPECT_FALSE(a.HasVolume("pvc-r1"));
  EXPECT_TRUE(b.HasVolume("pvc-r1"));
  EXPECT_TRUE(n1.HasVolume("pvc-f1"));
  EXPECT_TRUE(n2.HasVolume("pvc-f1"));
  EXPECT_EQ(gone.size(), 2u);
}

// The old rules still hold: a volume whose claim lives, or that is young,
// or Retain without a PV, stays; one whose claim and PV are gone goes.
TEST(Orphans, ClaimAndPvGoneIsSweptOtherwiseKept) {
  World w;
  FakeNode a("a");
  w.view.Add(&a, "fast", 10 * GiB);
  a.AddVolume(Vol("live"));
  a.AddVolume(Vol("gone"));
  a.AddVolume(Vol("kept", "Retain"));
  v1::Volume young = Vol("young");
  young.set_created_unix(std::time(nullptr));
  a.AddVolume(young);
  w.Load({Claim("live")});
  SweepOrphans(w.ctx, std::chrono::seconds(60));
  EXPECT_TRUE(a.HasVolume("pvc-live"));
  EXPECT_FALSE(a.HasVolume("pvc-gone"));
  EXPECT_TRUE(a.HasVolume("pvc-kept"));
  EXPECT_TRUE(a.HasVolume("pvc-young"));
}

// A pass of this process is between CreateVolume and its PV saved (the
// claim was deleted meanwhile, so nothing else would keep the volume):
// the sweep leaves it to the pass, and takes it once the pass has ended.
TEST(Orphans, AVolumeAPassIsWorkingOnIsSkipped) {
  World w;
  InFlight in_flight;
  FakeNode a("a");
  w.view.Add(&a, "fast", 10 * GiB);
  a.AddVolume(Vol("saving"));
  w.Load({});
  w.ctx.in_flight = &in_flight;
  {
    InFlight::Scope busy(&in_flight, "pvc-saving");
    EXPECT_TRUE(SweepOrphans(w.ctx, std::chrono::seconds(60)).empty());
    EXPECT_TRUE(a.HasVolume("pvc-saving"));
  }
  EXPECT_EQ(SweepOrphans(w.ctx, std::chrono::seconds(60)), std::vector<std::string>{"pvc-saving"});
  EXPECT_FALSE(a.HasVolume("pvc-saving"));
}

TEST(Orphans, AStoppingSweepDeletesNothing) {
  World w;
  FakeNode a("a");
  w.view.Add(&a, "fast", 10 * GiB);
  a.AddVolume(Vol("gone"));
  w.Load({});
  w.stop.Set();
  EXPECT_TRUE(SweepOrphans(w.ctx, std::chrono::seconds(60)).empty());
  EXPECT_TRUE(a.HasVolume("pvc-gone"));
}

// Item 7: the cache says Released + Delete, but an admin switched the PV
// to Retain (the watch lags): the live PV decides; nothing is deleted.
TEST(DeleteVolume, DecidesOnTheLivePvNotTheCache) {
  World w;
  FakeNode a("a");
  w.view.Add(&a, "fast", 10 * GiB);
  a.AddVolume(Vol("x1"));
  w.Load({}, {Pv("x1", "a", "Delete", "Released")});
  json live = Pv("x1", "a", "Retain", "Released");
  w.api.Put("/api/v1/persistentvolumes/pvc-x1", live);
  EXPECT_EQ(DeleteReleasedVolume(w.ctx, "pvc-x1"), Workers::Outcome::kDone);
  EXPECT_TRUE(a.HasVolume("pvc-x1"));
  EXPECT_TRUE(w.api.Has("/api/v1/persistentvolumes/pvc-x1"));
}

// Item 5 (delete half): an NFS PV whose creating node is down must not be
// "deleted" by a node that serves the pool but does not know the volume
// (it answers OK, the PV goes, the directory stays); one that knows it may.
TEST(DeleteVolume, AnNfsVolumeIsDeletedOnlyWhereItIsKnown) {
  World w;
  FakeNode n1("n1", "nfs"), n2("n2", "nfs"), n3("n3", "nfs");
  w.view.Add(&n1, "fast", 10 * GiB, "nfs");
  w.view.Add(&n2, "fast", 10 * GiB, "nfs");
  n1.SetDown(true);
  w.view.SetReachable("n1", false);
  n1.AddVolume(Vol("f2", "Delete", "nfs"));
  w.Load({}, {Pv("f2", "n1", "Delete", "Released", "nfs")});
  EXPECT_EQ(DeleteReleasedVolume(w.ctx, "pvc-f2"), Workers::Outcome::kRetry);
  EXPECT_EQ(n2.deletes(), 0);
  EXPECT_TRUE(w.api.Has("/api/v1/persistentvolumes/pvc-f2"));

  n3.AddVolume(Vol("f2", "Delete", "nfs"));  // a node that adopted it
  w.view.Add(&n3, "fast", 10 * GiB, "nfs");
  EXPECT_EQ(DeleteReleasedVolume(w.ctx, "pvc-f2"), Workers::Outcome::kDone);
  EXPECT_EQ(n2.deletes(), 0);
  EXPECT_FALSE(n3.HasVolume("pvc-f2"));
  // Named, so that a node knowing the volume only from the export's record
  // deletes it too (mountd/node/shared.cc).
  EXPECT_EQ(n3.last_shared_pool(), "fast");
  EXPECT_FALSE(w.api.Has("/api/v1/persistentvolumes/pvc-f2"));
}

// Issue 19: a conflict on the finalizer patch (the PV changed since it was
// read) retries the read and the patch only: the node is asked once.
TEST(DeleteVolume, AFinalizerConflictAsksTheNodeOnce) {
  World w;
  FakeNode a("a");
  w.view.Add(&a, "fast", 10 * GiB);
  a.AddVolume(Vol("x3"));
  json pv = Pv("x3", "a", "Delete", "Released");
  pv["metadata"]["finalizers"] = json::array({kFinalizer, "example.com/other"});
  w.Load({}, {pv});
  const std::string path = "/api/v1/persistentvolumes/pvc-x3";
  w.api.Put(path, pv);
  // The PV stays while a finalizer holds it (the fake would remove it).
  w.api.Script("DELETE", path, kube::Result::Ok());
  auto conflict = kube::Result::FromHttp(409, StatusBody(409, "Conflict", "the object has been modified").dump());
  w.api.Script("PATCH", path, conflict);
  w.api.Script("PATCH", path, conflict);
  EXPECT_EQ(DeleteReleasedVolume(w.ctx, "pvc-x3"), Workers::Outcome::kDone);
  EXPECT_EQ(a.deletes(), 1);
  EXPECT_FALSE(a.HasVolume("pvc-x3"));
  int patches = 0;
  for (const auto& c : w.api.Calls())
    if (c.verb == "PATCH" && c.path == path) ++patches;
  EXPECT_EQ(patches, 3);
  EXPECT_EQ(w.api.Object(path)["metadata"]["finalizers"], json::array({"example.com/other"}));

  // Conflicts without end: the pass gives up after a few and is retried.
  a.AddVolume(Vol("x4"));
  json pv4 = Pv("x4", "a", "Delete", "Released");
  pv4["metadata"]["finalizers"] = json::array({kFinalizer});
  w.Load({}, {pv4});
  const std::string path4 = "/api/v1/persistentvolumes/pvc-x4";
  w.api.Put(path4, pv4);
  w.api.Script("DELETE", path4, kube::Result::Ok());
  for (int i = 0; i < 10; ++i) w.api.Script("PATCH", path4, conflict);
  EXPECT_EQ(DeleteReleasedVolume(w.ctx, "pvc-x4"), Workers::Outcome::kRetry);
  EXPECT_EQ(a.deletes(), 2);
}

TEST(DeleteVolume, DeletesAReleasedVolumeAndItsPv) {
  World w;
  FakeNode a("a");
  w.view.Add(&a, "fast", 10 * GiB);
  a.AddVolume(Vol("x2"));
  w.Load({}, {Pv("x2", "a", "Delete", "Released")});
  EXPECT_EQ(DeleteReleasedVolume(w.ctx, "pvc-x2"), Workers::Outcome::kDone);
  EXPECT_FALSE(a.HasVolume("pvc-x2"));
  EXPECT_FALSE(w.api.Has("/api/v1/persistentvolumes/pvc-x2"));
}

// A PV an earlier pass deleted waits for the PV controller's finalizer;
// updates queue it again meanwhile. That pass asks the node nothing (one
// DeleteVolume per PV). A PV an operator deleted while our finalizer
// still holds it is ours to finish: its volume is deleted.
TEST(DeleteVolume, APvAlreadyReleasedByUsIsNotDeletedTwice) {
  World w;
  FakeNode a("a");
  w.view.Add(&a, "fast", 10 * GiB);
  a.AddVolume(Vol("d1"));
  a.AddVolume(Vol("d2"));
  json released = Pv("d1", "a", "Delete", "Released");
  released["metadata"]["deletionTimestamp"] = "2026-11-28T17:00:00Z";
  released["metadata"]["finalizers"] = {"kubernetes.io/pv-protection"};
  json held = Pv("d2", "a", "Delete", "Released");
  held["metadata"]["deletionTimestamp"] = "2026-11-28T17:00:00Z";
  held["metadata"]["finalizers"] = {"kubernetes.io/pv-protection", kFinalizer};
  w.Load({}, {released, held});
  EXPECT_EQ(DeleteReleasedVolume(w.ctx, "pvc-d1"), Workers::Outcome::kDone);
  EXPECT_EQ(a.deletes(), 0);
  EXPECT_TRUE(a.HasVolume("pvc-d1"));  // (in life it is already gone)
  EXPECT_EQ(DeleteReleasedVolume(w.ctx, "pvc-d2"), Workers::Outcome::kDone);
  EXPECT_EQ(a.deletes(), 1);
  EXPECT_FALSE(a.HasVolume("pvc-d2"));
}

// Issue 19 and the apiserver fault test: a 500 on deleting the PV, after
// the volume is gone, retries the pass; the retry finishes the PV without
// asking the node again.
TEST(DeleteVolume, AnApiFailureAfterTheVolumeIsGoneDoesNotAskTheNodeAgain) {
  World w;
  FakeNode a("a");
  w.view.Add(&a, "fast", 10 * GiB);
  a.AddVolume(Vol("x5"));
  json pv = Pv("x5", "a", "Delete", "Released");
  pv["metadata"]["finalizers"] = json::array({kFinalizer});
  w.Load({}, {pv});
  const std::string path = "/api/v1/persistentvolumes/pvc-x5";
  w.api.Script("DELETE", path, kube::Result::FromHttp(500, StatusBody(500, "InternalError", "etcd hiccup").dump()));
  EXPECT_EQ(DeleteReleasedVolume(w.ctx, "pvc-x5"), Workers::Outcome::kRetry);
  EXPECT_EQ(a.deletes(), 1);
  EXPECT_FALSE(a.HasVolume("pvc-x5"));
  EXPECT_TRUE(w.deleted.Contains("pv-x5"));

  EXPECT_EQ(DeleteReleasedVolume(w.ctx, "pvc-x5"), Workers::Outcome::kDone);
  EXPECT_EQ(a.deletes(), 1) << "the retry asked the node again";
  EXPECT_FALSE(w.api.Has(path));
  EXPECT_FALSE(w.deleted.Contains("pv-x5")) << "finished PVs are forgotten";
}

}  // namespace
}  // namespace nodevol::provisioner
