// pki::CheckClientIdentity: a certificate the CA signed passes only for
// clientAuth and a pinned CN or DNS name; IP addresses never count.
#include "pki/client_identity.h"

#include <gtest/gtest.h>

#include "pki/ca.h"

namespace nodevol::pki {
namespace {

class ClientIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(Ca::Make("test CA", std::chrono::hours(24), &ca_).ok()); }
  std::string Issue(Ca::Leaf leaf) {
    leaf.lifetime = std::chrono::hours(1);
    std::string key, cert;
    EXPECT_TRUE(ca_.Issue(leaf, &key, &cert).ok());
    return cert;
  }
  Ca ca_;
};

TEST_F(ClientIdentityTest, APinnedNameAsCnOrDnsNamePasses) {
  std::string who;
  std::string by_cn = Issue({"nodevol-provisioner", {}, {}, false, true});
  EXPECT_TRUE(CheckClientIdentityPem(by_cn, {"nodevol-provisioner"}, &who).ok());
  EXPECT_EQ(who, "nodevol-provisioner");
  std::string by_dns = Issue({"scheduler", {"kube-scheduler"}, {}, false, true});
  EXPECT_TRUE(CheckClientIdentityPem(by_dns, {"ops", "kube-scheduler"}, &who).ok());
  EXPECT_EQ(who, "kube-scheduler");
}

TEST_F(ClientIdentityTest, AnotherNameIsRefusedSayingWhatWouldPass) {
  std::string who;
  Status st = CheckClientIdentityPem(Issue({"scheduler", {"kube-scheduler"}, {}, false, true}),
                                     {"nodevol-provisioner"}, &who);
  EXPECT_EQ(st.code(), Status::Code::kPermissionDenied);
  EXPECT_NE(st.message().find("scheduler, kube-scheduler"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("accepted here: nodevol-provisioner"), std::string::npos) << st.message();
  // Names match whole: a prefix is another name.
  EXPECT_FALSE(CheckClientIdentityPem(Issue({"nodevol-provisioner-2", {}, {}, false, true}), {"nodevol-provisioner"},
                                      &who)
                   .ok());
}

TEST_F(ClientIdentityTest, AServingCertificateIsNoClientWhateverItsName) {
  std::string who;
  Status st = CheckClientIdentityPem(Issue({"nodevol-provisioner", {"nodevol-provisioner"}, {}, true, false}),
                                     {"nodevol-provisioner"}, &who);
  EXPECT_EQ(st.code(), Status::Code::kPermissionDenied);
  EXPECT_NE(st.message().find("clientAuth"), std::string::npos) << st.message();
  EXPECT_FALSE(CheckClientIdentityPem(Issue({"n1", {"n1"}, {}, true, false}), {}, &who).ok())
      << "even with no names pinned";
}

TEST_F(ClientIdentityTest, AnIpAddressNeverCounts) {
  std::string who;
  EXPECT_FALSE(CheckClientIdentityPem(Issue({"someone", {}, {"127.0.0.5"}, false, true}), {"127.0.0.5"}, &who).ok());
}

TEST_F(ClientIdentityTest, NoCertificateIsInvalid) {
  std::string who;
  EXPECT_EQ(CheckClientIdentityPem("not PEM", {"x"}, &who).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(CheckClientIdentity(nullptr, {"x"}, &who).code(), Status::Code::kPermissionDenied);
}

}  // namespace
}  // namespace nodevol::pki
