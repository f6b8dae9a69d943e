// The CA's Secret: made once, by one replica, and read back by the others;
// an operator's Secret used as it is; a broken one refused with its name.
// (What is published from it: node_ca_test.cc.)
#include "enroll/ca_store.h"

#include <gtest/gtest.h>

#include "controller/fakes_test.h"
#include "kube/base64.h"
#include "pki/ca.h"

namespace nodevol::provisioner {
namespace {

using namespace std::chrono_literals;
using testing::FakeApi;

constexpr char kCaSecretPath[] = "/api/v1/namespaces/nv/secrets/nodevol-ca";

TEST(CaStore, MakesTheCaOnceAndLoadsItThen) {
  FakeApi api;
  pki::Ca first, second;
  ASSERT_TRUE(LoadOrMakeCa(&api, "nv", "nodevol-ca", 24h, &first).ok());
  ASSERT_TRUE(api.Has(kCaSecretPath));
  EXPECT_EQ(api.Object(kCaSecretPath).value("type", ""), "kubernetes.io/tls");
  ASSERT_TRUE(LoadOrMakeCa(&api, "nv", "nodevol-ca", 24h, &second).ok());
  EXPECT_EQ(second.cert_pem(), first.cert_pem());
  EXPECT_EQ(api.Writes("/secrets"), 1);
}

TEST(CaStore, ASecondReplicaThatLosesTheRaceLoadsTheWinnersCa) {
  FakeApi api;
  pki::Ca winner, mine;
  ASSERT_TRUE(pki::Ca::Make("winner", 24h, &winner).ok());
  nlohmann::json stored = {{"metadata", {{"name", "nodevol-ca"}}},
                           {"data", {{"tls.crt", kube::EncodeBase64(winner.cert_pem())},
                                     {"tls.key", kube::EncodeBase64(winner.key_pem())}}}};
  // The GET finds nothing; the winner's create lands before ours.
  api.Script("GET", kCaSecretPath, kube::Result::FromHttp(404, testing::StatusBody(404, "NotFound", "").dump()));
  api.Put(kCaSecretPath, stored);
  ASSERT_TRUE(LoadOrMakeCa(&api, "nv", "nodevol-ca", 24h, &mine).ok());
  EXPECT_EQ(mine.cert_pem(), winner.cert_pem());
}

TEST(CaStore, RefusesASecretThatHoldsNoCa) {
  FakeApi api;
  pki::Ca ca, other;
  ASSERT_TRUE(pki::Ca::Make("a", 24h, &ca).ok());
  ASSERT_TRUE(pki::Ca::Make("b", 24h, &other).ok());
  api.Put(kCaSecretPath, {{"data", {{"tls.crt", kube::EncodeBase64(ca.cert_pem())}, {"tls.key", kube::EncodeBase64(other.key_pem())}}}});
  pki::Ca out;
  Status st = LoadOrMakeCa(&api, "nv", "nodevol-ca", 24h, &out);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("nv/nodevol-ca"), std::string::npos) << st.message();
  EXPECT_EQ(st.message().find("PRIVATE"), std::string::npos) << "the key must never be in a message";
  api.Put(kCaSecretPath, {{"data", {{"tls.crt", "!!"}}}});
  EXPECT_EQ(LoadOrMakeCa(&api, "nv", "nodevol-ca", 24h, &out).code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace nodevol::provisioner
