#include "controller/claim.h"

#include <gtest/gtest.h>

#include "controller/names.h"
#include "controller/pv.h"

namespace nodevol::provisioner {
namespace {

nlohmann::json Pvc() {
  return nlohmann::json::parse(R"({
    "metadata": {"namespace": "app", "name": "data", "uid": "1234-abcd", "resourceVersion": "77",
                 "annotations": {"volume.kubernetes.io/storage-provisioner": "nodevol.io"},
                 "labels": {"tier": "db"}},
    "spec": {"storageClassName": "fast", "accessModes": ["ReadWriteOnce"],
             "resources": {"requests": {"storage": "1.5Gi"}}}})");
}

TEST(Claim, ParsesWhatProvisioningNeeds) {
  ClaimView c;
  ASSERT_TRUE(ParseClaim(Pvc(), &c).ok());
  EXPECT_EQ(c.Key(), "app/data");
  EXPECT_EQ(c.PvName(), "pvc-1234-abcd");
  EXPECT_EQ(c.request_bytes, 1536ull << 20);
  EXPECT_EQ(c.volume_mode, "Filesystem");
  EXPECT_EQ(c.class_name, "fast");
  EXPECT_EQ(c.labels.at("tier"), "db");
}

TEST(Claim, DecodeKeepsWhatResizeAndRestoreReadAndDropsKubectlsCopy) {
  auto pvc = Pvc();
  pvc["metadata"]["annotations"][kAnnLastApplied] = pvc.dump();
  pvc["spec"]["dataSource"] = {{"kind", "PersistentVolumeClaim"}, {"name", "old"}};
  pvc["spec"]["dataSourceRef"] = {{"kind", "VolumeSnapshot"}, {"apiGroup", "snapshot.storage.k8s.io"}, {"name", "s1"}};
  pvc["status"] = {{"phase", "Bound"},
                   {"capacity", {{"storage", "2Gi"}}},
                   {"conditions", {{{"type", "Resizing"}, {"status", "True"}}}}};
  ClaimView c = DecodeClaim(pvc);
  ASSERT_TRUE(c.error.ok()) << c.error.ToString();
  EXPECT_EQ(c.annotations.count(kAnnLastApplied), 0u);
  EXPECT_EQ(c.annotations.at(kAnnStorageProvisioner), "nodevol.io");
  // dataSourceRef wins over dataSource, as the API's own defaulting.
  EXPECT_EQ(c.data_source.kind, "VolumeSnapshot");
  EXPECT_EQ(c.data_source.api_group, "snapshot.storage.k8s.io");
  EXPECT_EQ(c.data_source.name, "s1");
  EXPECT_EQ(c.status_bytes, 2ull << 30);
  ASSERT_TRUE(c.conditions.is_array());
  EXPECT_EQ(c.conditions[0].value("type", ""), "Resizing");
  ObjectRef ref = c.Ref();
  EXPECT_EQ(ref.kind, "PersistentVolumeClaim");
  EXPECT_EQ(ref.ns, "app");
  EXPECT_EQ(ref.uid, "1234-abcd");
  EXPECT_EQ(ref.resource_version, "77");
}

TEST(Claim, AMalformedClaimDecodesWithItsReasonAndWhatCouldBeRead) {
  auto pvc = Pvc();
  pvc["spec"]["resources"]["requests"]["storage"] = "lots";
  pvc["spec"]["dataSource"] = "not an object";
  pvc["status"] = {{"capacity", 7}};
  ClaimView c = DecodeClaim(pvc);
  EXPECT_EQ(c.error.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(c.error.message().find("\"lots\""), std::string::npos) << c.error.message();
  // Enough to tell whose claim it is and to record an event on it.
  EXPECT_EQ(c.Key(), "app/data");
  EXPECT_EQ(c.provisioner, "nodevol.io");
  EXPECT_EQ(c.data_source.kind, "");
  EXPECT_EQ(c.status_bytes, 0u);
  EXPECT_TRUE(DecodeClaim(nlohmann::json::array()).error.code() == Status::Code::kInvalidArgument);
}

TEST(Claim, BetaClassAnnotationWins) {
  auto pvc = Pvc();
  pvc["metadata"]["annotations"]["volume.beta.kubernetes.io/storage-class"] = "legacy";
  ClaimView c;
  ASSERT_TRUE(ParseClaim(pvc, &c).ok());
  EXPECT_EQ(c.class_name, "legacy");
}

TEST(Claim, BadRequestsAreErrors) {
  for (const char* q : {"", "lots", "0", "-1Gi"}) {
    auto pvc = Pvc();
    pvc["spec"]["resources"]["requests"]["storage"] = q;
    ClaimView c;
    EXPECT_FALSE(ParseClaim(pvc, &c).ok()) << q;
  }
}

TEST(Claim, HandOverRules) {
  ClaimView c;
  ASSERT_TRUE(ParseClaim(Pvc(), &c).ok());
  std::string why;
  EXPECT_EQ(ShouldProvision(c, kProvisionerName, "Immediate", &why), ClaimAction::kProvision);
  EXPECT_EQ(ShouldProvision(c, kProvisionerName, "WaitForFirstConsumer", &why), ClaimAction::kIgnore);
  EXPECT_NE(why.find("no node is selected"), std::string::npos);
  c.selected_node = "n1";
  EXPECT_EQ(ShouldProvision(c, kProvisionerName, "WaitForFirstConsumer", &why), ClaimAction::kProvision);
  EXPECT_EQ(ShouldProvision(c, "other.io/x", "Immediate", &why), ClaimAction::kIgnore);
  c.volume_name = "pv-static";
  EXPECT_EQ(ShouldProvision(c, kProvisionerName, "Immediate", &why), ClaimAction::kIgnore);
  c.volume_name.clear();
  c.deleting = true;
  EXPECT_EQ(ShouldProvision(c, kProvisionerName, "Immediate", &why), ClaimAction::kIgnore);
}

TEST(Pv, CarriesEverythingTheBinderChecks) {
  PvPlan p;
  ASSERT_TRUE(ParseClaim(Pvc(), &p.claim).ok());
  p.class_name = "fast";
  p.node = "n1", p.pool = "fast", p.backend = "lvm", p.fs_type = "xfs";
  p.bytes = 1536ull << 20;
  p.mount_options = {"noatime"};
  p.csi = false;
  auto pv = BuildPersistentVolume(p);
  EXPECT_EQ(pv["metadata"]["name"], "pvc-1234-abcd");
  EXPECT_EQ(pv["metadata"]["annotations"][kAnnProvisionedBy], kProvisionerName);
  EXPECT_EQ(pv["metadata"]["finalizers"][0], kFinalizer);
  EXPECT_EQ(pv["spec"]["capacity"]["storage"], "1536Mi");
  EXPECT_EQ(pv["spec"]["claimRef"]["uid"], "1234-abcd");
  EXPECT_EQ(pv["spec"]["claimRef"]["resourceVersion"], "77");
  EXPECT_EQ(pv["spec"]["storageClassName"], "fast");
  EXPECT_EQ(pv["spec"]["flexVolume"]["driver"], kFlexDriver);
  EXPECT_EQ(pv["spec"]["flexVolume"]["fsType"], "xfs");
  EXPECT_EQ(pv["spec"]["flexVolume"]["options"]["mountOptions"], "noatime");
  EXPECT_EQ(pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0], "n1");
  p.reclaim_policy = "Retain";
  p.backend = "nfs", p.node_label_key = "nodevol.io/node", p.node_label_value = "true";
  pv = BuildPersistentVolume(p);
  EXPECT_FALSE(pv["metadata"].contains("finalizers"));
  EXPECT_FALSE(pv["spec"]["flexVolume"]["options"].contains("mountOptions"));
  // Any node serving the pool publishes it: the pool tells it which
  // export holds the volume's record.
  EXPECT_EQ(pv["spec"]["flexVolume"]["options"]["pool"], "fast");
  EXPECT_EQ(pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["key"],
            "nodevol.io/node");
}

TEST(Pv, CsiSourceNamesTheVolumeAndItsPool) {
  PvPlan p;
  ASSERT_TRUE(ParseClaim(Pvc(), &p.claim).ok());
  p.class_name = "fast";
  p.node = "n1", p.pool = "fast", p.backend = "lvm", p.fs_type = "xfs";
  p.bytes = 1ull << 30;
  p.mount_options = {"noatime"};
  auto pv = BuildPersistentVolume(p);  // CSI is the default
  EXPECT_FALSE(pv["spec"].contains("flexVolume"));
  EXPECT_EQ(pv["spec"]["csi"]["driver"], kProvisionerName);
  EXPECT_EQ(pv["spec"]["csi"]["volumeHandle"], "pvc-1234-abcd");
  EXPECT_EQ(pv["spec"]["csi"]["fsType"], "xfs");
  EXPECT_EQ(pv["spec"]["csi"]["volumeAttributes"]["pool"], "fast");
  EXPECT_EQ(pv["spec"]["mountOptions"][0], "noatime");
  EXPECT_EQ(pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0], "n1");
  // A directory volume has no filesystem of its own to name.
  p.backend = "dir", p.fs_type = "";
  EXPECT_FALSE(BuildPersistentVolume(p)["spec"]["csi"].contains("fsType"));
  // NFS took its mount options at creation: kubelet must not hand them to
  // every publish, where a bind cannot apply them.
  p.backend = "nfs", p.node_label_key = "nodevol.io/node", p.node_label_value = "true";
  EXPECT_FALSE(BuildPersistentVolume(p)["spec"].contains("mountOptions"));
}

}  // namespace
}  // namespace nodevol::provisioner
