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

// Issue 28 item 8: claim values reach records, NFS paths and operators'
// terminals; only printable text is accepted, and the refusal does not
// repeat the value.
TEST(ClaimParams, ValuesMustBePrintableText) {
  for (const char* v : {"alice", "équipe-7", "\u4f60\u597d", "a b/c:d=e", ""})
    EXPECT_TRUE(CheckClaimParam("nodevol.io/pvc-annotation.owner", v).ok()) << v;
  for (std::string v : {std::string("x\x1b]2;owned\x07"), std::string("a\nb"), std::string("tab\t"),
                        std::string("nul\0", 4), std::string("del\x7f"), std::string("csi\xc2\x9b" "31m"),
                        std::string("raw\x9b"), std::string("bad\xff"), std::string("overlong\xc0\xaf"),
                        std::string("cut\xe4\xbd"), std::string(4097, 'a')}) {
    Status st = CheckClaimParam("nodevol.io/pvc-name", v);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << v;
    EXPECT_EQ(st.message().find(v), std::string::npos) << "the value is echoed: " << st.message();
  }
  EXPECT_EQ(CheckClaimParam("nodevol.io/pvc-label.app\x1b[2J", "web").code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(CheckClaimParam("nodevol.io/pvc-annotation." + std::string(400, 'k'), "v").code(),
            Status::Code::kInvalidArgument);
  EXPECT_TRUE(CheckClaimParam("nodevol.io/pvc-annotation.example.com/team_a-b", "v").ok());
}

TEST(ClaimParams, BackendsRefuseAControlCharacterInAValue) {
  VolumeRoot root;
  Status st = ParseVolumeRoot("a dir volume", {{"nodevol.io/pvc-annotation.owner", "x\xc2\x9b" "2J"}}, &root);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("nodevol.io/pvc-annotation.owner"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace nodevol
