#include "backend/claim_params.h"

#include <gtest/gtest.h>

#include "backend/volume_root.h"

namespace nodevol {
namespace {

TEST(ClaimParams, KnowsTheProvisionersKeysOnly) {
  for (const char* k : {"nodevol.io/pvc-namespace", "nodevol.io/pvc-name", "nodevol.io/pv-name",
                        "nodevol.io/storage-class", "nodevol.io/reclaim-policy", "nodevol.io/provisioner",
                        "nodevol.io/pvc-annotation.team", "nodevol.io/pvc-label.app"})
    EXPECT_TRUE(IsClaimParam(k)) << k;
  for (const char* k : {"nodevol.io/pvc-annotation.", "nodevol.io/pvc-label.", "nodevol.io/other", "nodevol.io/",
                        "pvc-name", "mode", "NODEVOL.IO/pvc-name"})
    EXPECT_FALSE(IsClaimParam(k)) << k;
}

TEST(ClaimParams, VolumeRootAcceptsThemAndStillRefusesStrangers) {
  VolumeRoot root;
  Params p = {{"mode", "0750"}, {"nodevol.io/pvc-name", "data"}, {"nodevol.io/pvc-label.app", "db"},
              {"nodevol.io/reclaim-policy", "Delete"}};
  ASSERT_TRUE(ParseVolumeRoot("a dir volume", p, &root).ok());
  EXPECT_EQ(root.mode, 0750u);
  Status st = ParseVolumeRoot("a dir volume", {{"nodevol.io/colour", "red"}}, &root);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("nodevol.io/colour"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace nodevol
