#include "controller/volume_view.h"

#include <gtest/gtest.h>

#include "controller/names.h"
#include "controller/pv.h"

namespace nodevol::provisioner {
namespace {

PvPlan Plan(bool csi) {
  PvPlan p;
  p.claim = DecodeClaim(nlohmann::json::parse(R"({
    "metadata": {"namespace": "app", "name": "data", "uid": "u-1", "resourceVersion": "9"},
    "spec": {"storageClassName": "fast", "resources": {"requests": {"storage": "1Gi"}}}})"));
  p.class_name = "fast";
  p.reclaim_policy = "Retain";
  p.node = "n1";
  p.pool = "vg";
  p.backend = "lvm";
  p.bytes = 3ull << 30;
  p.csi = csi;
  return p;
}

// What the controller reads back of the PV it saves, through the cache.
TEST(VolumeView, DecodesThePvTheProvisionerSaves) {
  for (bool csi : {true, false}) {
    nlohmann::json pv = BuildPersistentVolume(Plan(csi));
    pv["metadata"]["uid"] = "pv-uid";
    pv["metadata"]["resourceVersion"] = "12";
    pv["status"] = {{"phase", "Released"}};
    VolumeView v = DecodeVolume(pv);
    EXPECT_EQ(v.name, "pvc-u-1");
    EXPECT_EQ(v.uid, "pv-uid");
    EXPECT_EQ(v.resource_version, "12");
    EXPECT_EQ(v.provisioned_by, kProvisionerName);
    EXPECT_EQ(v.node, "n1");
    EXPECT_EQ(v.pool, "vg");
    EXPECT_EQ(v.backend, "lvm");
    EXPECT_EQ(v.reclaim_policy, "Retain");
    EXPECT_EQ(v.phase, "Released");
    EXPECT_EQ(v.class_name, "fast");
    EXPECT_EQ(v.claim_ns, "app");
    EXPECT_EQ(v.claim_name, "data");
    EXPECT_EQ(v.claim_uid, "u-1");
    EXPECT_EQ(v.capacity_bytes, 3ull << 30);
    EXPECT_EQ(v.csi, csi);
    if (csi) {
      EXPECT_EQ(v.csi_driver, kProvisionerName);
      EXPECT_EQ(v.volume_handle, "pvc-u-1");
    }
    EXPECT_EQ(v.Ref().kind, "PersistentVolume");
    EXPECT_EQ(v.Ref().ns, "");
  }
}

TEST(VolumeView, AnythingMissingOrMistypedReadsAsEmpty) {
  auto pv = nlohmann::json::parse(R"({"metadata": {"name": "x", "annotations": {"nodevol.io/node": 3}},
                                      "spec": {"capacity": {"storage": "many"}, "claimRef": null, "csi": "no"}})");
  VolumeView v = DecodeVolume(pv);
  EXPECT_EQ(v.name, "x");
  EXPECT_EQ(v.node, "");
  EXPECT_EQ(v.capacity_bytes, 0u);
  EXPECT_EQ(v.claim_uid, "");
  EXPECT_FALSE(v.csi);
  EXPECT_EQ(DecodeVolume(nlohmann::json()).name, "");
}

}  // namespace
}  // namespace nodevol::provisioner
