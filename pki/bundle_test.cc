// A bundle splits into its certificates in order, each named by its
// fingerprint; a leaf is matched to the one CA of the bundle it chains to.
#include "pki/bundle.h"

#include <gtest/gtest.h>

#include "pki/ca.h"

namespace nodevol::pki {
namespace {

using namespace std::chrono_literals;

TEST(Bundle, SplitsInOrderSkipsJunkAndRepeats) {
  Ca a, b;
  ASSERT_TRUE(Ca::Make("a", 24h, &a).ok());
  ASSERT_TRUE(Ca::Make("b", 24h, &b).ok());
  auto certs = SplitBundle(b.cert_pem() + "not a certificate\n" + a.cert_pem() + b.cert_pem());
  ASSERT_EQ(certs.size(), 2u);
  EXPECT_EQ(certs[0].fingerprint, Fingerprint(b.cert_pem()));
  EXPECT_EQ(certs[1].fingerprint, Fingerprint(a.cert_pem()));
  EXPECT_NE(certs[0].fingerprint, certs[1].fingerprint);
  EXPECT_EQ(certs[0].fingerprint.size(), 64u);
  EXPECT_EQ(certs[1].validity.not_after, a.not_after());
  EXPECT_EQ(SplitBundle(JoinBundle(certs)).size(), 2u);
  EXPECT_TRUE(SplitBundle("").empty());
  EXPECT_EQ(Fingerprint("junk"), "");
}

TEST(Bundle, FindsTheCaALeafChainsTo) {
  Ca a, b;
  ASSERT_TRUE(Ca::Make("a", 24h, &a).ok());
  ASSERT_TRUE(Ca::Make("b", 24h, &b).ok());
  std::string key, cert;
  ASSERT_TRUE(a.Issue({"n1", {"n1"}, {}, true, false, 1h}, &key, &cert).ok());
  auto both = SplitBundle(b.cert_pem() + a.cert_pem());
  const BundleCert* issuer = IssuerIn(both, cert, std::chrono::system_clock::now());
  ASSERT_NE(issuer, nullptr);
  EXPECT_EQ(issuer->fingerprint, Fingerprint(a.cert_pem()));
  EXPECT_EQ(IssuerIn(SplitBundle(b.cert_pem()), cert, std::chrono::system_clock::now()), nullptr);
}

}  // namespace
}  // namespace nodevol::pki
