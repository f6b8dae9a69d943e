#include "capacity/storage_capacity.h"

#include <gtest/gtest.h>

#include "controller/fakes_test.h"
#include "placement/seen_test.h"
#include "base/size.h"

namespace nodevol::provisioner {
namespace {

using namespace testing;
const std::string kColl = "/apis/storage.k8s.io/v1/namespaces/nodevol-system/csistoragecapacities";
const std::string kList =
    kColl + "?labelSelector=csi.storage.k8s.io/managed-by%3Dnodevol-provisioner%2Ccsi.storage.k8s.io/drivername%3Dnodevol.io";

json NodeObj(const std::string& name, const std::string& hostname) {
  return {{"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", hostname}}}}}};
}
json ClassObj(const std::string& name, const std::string& provisioner, const std::string& pool) {
  return {{"metadata", {{"name", name}}}, {"provisioner", provisioner}, {"parameters", {{"pool", pool}}}};
}

struct Fixture {
  FakeApi api;
  std::vector<PoolSeen> pools = {Seen("n1", "fast", "lvm", 100 * MiB, true), Seen("n3", "fast", "lvm", 500 * MiB, false)};
  CapacityLedger ledger{[this] { return pools; }};
  std::unique_ptr<kube::Informer> classes = StaticCache(
      {ClassObj("fast", "nodevol.io", "fast"), ClassObj("old", "nodevol.io/provisioner", "fast"),
       ClassObj("theirs", "other.io", "fast")});
  std::unique_ptr<kube::TypedInformer<KubeNode>> nodes;
  std::unique_ptr<CapacityPublisher> pub;

  void Make(std::vector<json> node_list, std::chrono::milliseconds unknown_grace = std::chrono::minutes(1)) {
    nodes = StaticCache<KubeNode>(std::move(node_list), DecodeNode);
    CapacityPublisher::Options o;
    o.unknown_grace = unknown_grace;
    o.driver = "nodevol.io";
    o.ns = "nodevol-system";
    o.owner = {{"apiVersion", "apps/v1"}, {"kind", "Deployment"}, {"name", "nodevol-provisioner"}, {"uid", "d1"}};
    o.writes_per_second = 1000;
    pub = std::make_unique<CapacityPublisher>(&api, classes.get(), nodes.get(), &ledger, o);
  }
  // What a LIST would return now.
  void Relist() {
    json items = json::array();
    for (const auto& n : {"n1", "n2", "n3"}) {
      std::string path = kColl + "/" + CapacityPublisher::ObjectName("fast", n);
      if (api.Has(path)) {
        json o = api.Object(path);
        o["metadata"]["uid"] = std::string("uid-") + n;
        items.push_back(o);
      }
    }
    api.Put(kList, {{"items", items}});
  }
  json Object(const std::string& node) { return api.Object(kColl + "/" + CapacityPublisher::ObjectName("fast", node)); }
};

TEST(CapacityPublisher, OneObjectPerClassAndNodeWithTheLedgersRoom) {
  Fixture f;
  f.Relist();
  f.Make({NodeObj("n1", "host-1"), NodeObj("n2", "host-2"), NodeObj("n3", "host-3")});
  ASSERT_TRUE(f.pub->Sync().ok());
  EXPECT_EQ(f.api.Writes(kColl), 3) << "one per node, none for another provisioner's or the old name's class";
  json o = f.Object("n1");
  EXPECT_EQ(o["storageClassName"], "fast");
  EXPECT_EQ(o["nodeTopology"]["matchLabels"]["kubernetes.io/hostname"], "host-1");
  EXPECT_EQ(o["capacity"], std::to_string(100 * MiB));
  EXPECT_EQ(o["maximumVolumeSize"], std::to_string(100 * MiB));
  EXPECT_EQ(o["metadata"]["labels"]["csi.storage.k8s.io/drivername"], "nodevol.io");
  EXPECT_EQ(o["metadata"]["ownerReferences"][0]["kind"], "Deployment");
  // n2 has no such pool, n3's nodevold is unreachable: an object saying 0,
  // so the scheduler rejects them for this class instead of guessing.
  EXPECT_EQ(f.Object("n2")["capacity"], "0");
  EXPECT_EQ(f.Object("n3")["capacity"], "0");

  // Nothing changed: nothing written.
  ASSERT_TRUE(f.pub->Sync().ok());
  EXPECT_EQ(f.api.Writes(kColl), 3);

  // A promise lowers the room: one patch, of that object only.
  f.ledger.Promise("c", "n1", "fast", 30 * MiB, CapacityLedger::Kind::kSelected,
                   CapacityLedger::Clock::now() + std::chrono::minutes(1));
  ASSERT_TRUE(f.pub->Sync().ok());
  EXPECT_EQ(f.api.Writes(kColl), 4);
  EXPECT_EQ(f.Object("n1")["capacity"], std::to_string(70 * MiB));
}

TEST(CapacityPublisher, ANewLeaderAdoptsTheObjectsAndDropsThoseOfGoneNodes) {
  Fixture f;
  f.Relist();
  f.Make({NodeObj("n1", "host-1"), NodeObj("n2", "host-2")});
  ASSERT_TRUE(f.pub->Sync().ok());
  f.Relist();
  int before = f.api.Writes(kColl);
  // Another replica leads now; n2 left the cluster, n1's hostname changed.
  f.Make({NodeObj("n1", "host-1b")});
  ASSERT_TRUE(f.pub->Sync().ok());
  EXPECT_FALSE(f.api.Has(kColl + "/" + CapacityPublisher::ObjectName("fast", "n2")));
  // nodeTopology is immutable: deleted and made again.
  EXPECT_EQ(f.Object("n1")["nodeTopology"]["matchLabels"]["kubernetes.io/hostname"], "host-1b");
  EXPECT_EQ(f.api.Writes(kColl) - before, 3);  // delete n2; delete + create n1
}

// A new leader has no figures until it reaches each nodevold: the objects
// keep their values meanwhile (else every node would be turned away for
// the seconds of dialling); nodes it has reached are updated.
TEST(CapacityPublisher, NodesWithoutFiguresYetKeepTheirValue) {
  Fixture f;
  f.Relist();
  f.Make({NodeObj("n1", "host-1"), NodeObj("n2", "host-2")});
  ASSERT_TRUE(f.pub->Sync().ok());
  EXPECT_EQ(f.Object("n1")["capacity"], std::to_string(100 * MiB));
  f.Relist();
  f.pools.clear();  // the next leader, before its first report
  f.Make({NodeObj("n1", "host-1"), NodeObj("n2", "host-2")});
  int before = f.api.Writes(kColl);
  ASSERT_TRUE(f.pub->Sync().ok());
  EXPECT_EQ(f.api.Writes(kColl), before);
  EXPECT_EQ(f.Object("n1")["capacity"], std::to_string(100 * MiB));
  // n1 reported, unreachable since: 0.
  f.pools = {Seen("n1", "fast", "lvm", 100 * MiB, false)};
  ASSERT_TRUE(f.pub->Sync().ok());
  EXPECT_EQ(f.Object("n1")["capacity"], "0");
}

// Past the grace, a node whose nodevold never answered this leader drops
// to 0: it kept the last leader's value for ever (issue 57, item 10).
TEST(CapacityPublisher, ANodeNeverHeardDropsToZeroAfterTheGrace) {
  Fixture f;
  f.Relist();
  f.Make({NodeObj("n1", "host-1"), NodeObj("n2", "host-2")});
  ASSERT_TRUE(f.pub->Sync().ok());
  EXPECT_EQ(f.Object("n1")["capacity"], std::to_string(100 * MiB));
  f.Relist();
  f.pools.clear();  // the next leader never hears from n1
  f.Make({NodeObj("n1", "host-1"), NodeObj("n2", "host-2")}, std::chrono::milliseconds(0));
  ASSERT_TRUE(f.pub->Sync().ok());
  EXPECT_EQ(f.Object("n1")["capacity"], "0");
}

TEST(CapacityPublisher, NamesAreStableAndDistinct) {
  EXPECT_EQ(CapacityPublisher::ObjectName("a", "b"), CapacityPublisher::ObjectName("a", "b"));
  EXPECT_NE(CapacityPublisher::ObjectName("a", "b"), CapacityPublisher::ObjectName("b", "a"));
  EXPECT_NE(CapacityPublisher::ObjectName("a\nb", "c"), CapacityPublisher::ObjectName("a", "b\nc"));
  EXPECT_EQ(CapacityPublisher::ObjectName("a", "b").size(), 28u);
}

TEST(CapacityPublisher, FindsTheDeploymentThroughTheReplicaSet) {
  FakeApi api;
  api.Put("/api/v1/namespaces/ns/pods/p",
          {{"metadata", {{"ownerReferences", {{{"apiVersion", "apps/v1"}, {"kind", "ReplicaSet"}, {"name", "rs"},
                                               {"uid", "u-rs"}, {"controller", true}}}}}}});
  api.Put("/apis/apps/v1/namespaces/ns/replicasets/rs",
          {{"metadata", {{"ownerReferences", {{{"apiVersion", "apps/v1"}, {"kind", "Deployment"}, {"name", "d"},
                                               {"uid", "u-d"}, {"controller", true}}}}}}});
  json ref;
  ASSERT_TRUE(FindDeploymentOwner(&api, "ns", "p", &ref).ok());
  EXPECT_EQ(ref["kind"], "Deployment");
  EXPECT_EQ(ref["uid"], "u-d");
  api.Put("/api/v1/namespaces/ns/pods/q", {{"metadata", json::object()}});
  EXPECT_EQ(FindDeploymentOwner(&api, "ns", "q", &ref).code(), Status::Code::kNotFound);
}

}  // namespace
}  // namespace nodevol::provisioner
