// The CA as replicas follow it, against an in-memory apiserver: only the
// leader publishes, always the CA it signs with first (issue 60 item 1: a
// restarted standby published a new CA while the leader signed with the
// old, and every node re-enrolled on every pass); a rotation keeps the old
// CA while nodes move; a CA near its end is said in the log, an event and
// a gauge.
#include "enroll/node_ca.h"

#include <gtest/gtest.h>

#include <thread>

#include "controller/events.h"
#include "controller/fakes_test.h"
#include "kube/base64.h"
#include "metrics/metrics.h"
#include "pki/ca.h"

namespace nodevol::provisioner {
namespace {

using namespace std::chrono_literals;
using testing::FakeApi;

constexpr char kSecret[] = "/api/v1/namespaces/nv/secrets/node-ca";
constexpr char kConfigMap[] = "/api/v1/namespaces/nv/configmaps/nodevol-ca";

NodeCa::Config Config() {
  NodeCa::Config c;
  c.ns = "nv";
  c.secret = "node-ca";
  c.configmap = "nodevol-ca";
  return c;
}

void StoreCa(FakeApi* api, const pki::Ca& ca) {
  api->Put(kSecret, {{"metadata", {{"name", "node-ca"}, {"namespace", "nv"}}},
                     {"type", "kubernetes.io/tls"},
                     {"data", {{"tls.crt", kube::EncodeBase64(ca.cert_pem())}, {"tls.key", kube::EncodeBase64(ca.key_pem())}}}});
}

std::vector<std::string> PublishedFingerprints(FakeApi* api) {
  std::vector<std::string> out;
  if (!api->Has(kConfigMap)) return out;
  for (const auto& c : pki::SplitBundle(api->Object(kConfigMap)["data"].value("ca.crt", ""))) out.push_back(c.fingerprint);
  return out;
}

std::string Fp(const pki::Ca& ca) { return pki::Fingerprint(ca.cert_pem()); }

// As if every published CA had been in the bundle for two hours (nodes
// trust them all by now).
void AgePublished(FakeApi* api) {
  nlohmann::json cm = api->Object(kConfigMap);
  nlohmann::json since = nlohmann::json::object();
  for (const auto& c : pki::SplitBundle(cm["data"].value("ca.crt", ""))) since[c.fingerprint] = "2000-01-01T00:00:00Z";
  cm["metadata"]["annotations"][kTrustedSinceAnnotation] = since.dump();
  api->Put(kConfigMap, cm);
}
std::string Fp(const std::shared_ptr<const pki::Ca>& ca) { return pki::Fingerprint(ca->cert_pem()); }

// An apiserver whose CA Secret holds c1; c2 is the one it is replaced by.
struct TwoCas {
  FakeApi api;
  pki::Ca c1, c2;
  TwoCas() {
    EXPECT_TRUE(pki::Ca::Make("c1", 24h * 365, &c1).ok());
    EXPECT_TRUE(pki::Ca::Make("c2", 24h * 365, &c2).ok());
    StoreCa(&api, c1);
  }
};

TEST(NodeCa, OnlyTheLeaderPublishesAndFromTheCaItSignsWith) {
  TwoCas w;
  FakeApi& api = w.api;
  const pki::Ca &c1 = w.c1, &c2 = w.c2;
  NodeCa leader(&api, Config());
  ASSERT_TRUE(leader.Load().ok());
  EXPECT_FALSE(api.Has(kConfigMap)) << "loading publishes nothing: a replica may be a standby";
  leader.Poll(true, std::vector<std::string>{});
  EXPECT_EQ(PublishedFingerprints(&api), std::vector<std::string>{Fp(c1)});
  AgePublished(&api);

  // The Secret is replaced; a standby restarts and reads it first.
  StoreCa(&api, c2);
  NodeCa standby(&api, Config());
  ASSERT_TRUE(standby.Load().ok());
  standby.Poll(false, std::nullopt);
  EXPECT_EQ(PublishedFingerprints(&api), std::vector<std::string>{Fp(c1)}) << "a standby must not publish";
  EXPECT_EQ(Fp(standby.Signer()), Fp(c2));
  // Its client certificate comes from the CA the nodes trust (it holds no
  // other key: the new one, logged), and it trusts both.
  EXPECT_EQ(Fp(standby.ClientIssuer()), Fp(c2));
  EXPECT_EQ(pki::SplitBundle(standby.TrustBundle()).size(), 2u);

  // The leader follows the Secret: signs with c2 and publishes it first,
  // keeping c1; its client certificate stays with c1 meanwhile.
  EXPECT_EQ(Fp(leader.Signer()), Fp(c1));
  EXPECT_TRUE(leader.Poll(true, std::vector<std::string>{Fp(c1)}));
  EXPECT_EQ(Fp(leader.Signer()), Fp(c2));
  EXPECT_EQ(PublishedFingerprints(&api), (std::vector<std::string>{Fp(c2), Fp(c1)}));
  EXPECT_EQ(Fp(leader.ClientIssuer()), Fp(c1));
  EXPECT_FALSE(api.Object(kConfigMap)["metadata"]["annotations"].value(kSignerSinceAnnotation, "").empty());
  const int writes = api.Writes("/configmaps");
  leader.Poll(true, std::vector<std::string>{Fp(c1)});
  EXPECT_EQ(api.Writes("/configmaps"), writes) << "nothing changed: nothing written";
}

TEST(NodeCa, ARotationEndsWhenEveryNodeServesFromTheNewCa) {
  TwoCas w;
  FakeApi& api = w.api;
  const pki::Ca &c1 = w.c1, &c2 = w.c2;
  NodeCa::Config config = Config();
  config.times.spread = 0s;
  config.times.settle = 0s;
  NodeCa leader(&api, config);
  ASSERT_TRUE(leader.Load().ok());
  leader.Poll(true, std::vector<std::string>{});
  StoreCa(&api, c2);
  leader.Poll(true, std::vector<std::string>{Fp(c1), Fp(c1)});
  EXPECT_EQ(PublishedFingerprints(&api).size(), 2u);
  EXPECT_EQ(Fp(leader.ClientIssuer()), Fp(c2)) << "spread 0: every node trusts c2 at once";
  // The nodes are not known yet (a leader whose caches have not synced),
  // or one has not moved: c1 stays.
  leader.Poll(true, std::nullopt);
  leader.Poll(true, std::vector<std::string>{Fp(c2), Fp(c1)});
  EXPECT_EQ(PublishedFingerprints(&api).size(), 2u);
  // A leader that restarts mid-rotation goes on from the ConfigMap.
  NodeCa next(&api, config);
  ASSERT_TRUE(next.Load().ok());
  next.Poll(true, std::vector<std::string>{Fp(c2), Fp(c2)});
  EXPECT_EQ(PublishedFingerprints(&api), std::vector<std::string>{Fp(c2)});
  EXPECT_EQ(pki::SplitBundle(next.TrustBundle()).size(), 1u);
}

// A leader whose publish of the new CA failed keeps signing with the old
// one: nodes renewing meanwhile get what their bundle leads with, not a
// certificate that sends them back for another at every pass.
TEST(NodeCa, ANewCaSignsOnlyOncePublishedFirst) {
  TwoCas w;
  NodeCa leader(&w.api, Config());
  ASSERT_TRUE(leader.Load().ok());
  leader.Poll(true, std::vector<std::string>{});
  StoreCa(&w.api, w.c2);
  w.api.Script("PATCH", kConfigMap, kube::Result::FromHttp(500, testing::StatusBody(500, "InternalError", "").dump()));
  leader.Poll(true, std::vector<std::string>{});
  EXPECT_EQ(PublishedFingerprints(&w.api), std::vector<std::string>{Fp(w.c1)});
  EXPECT_EQ(Fp(leader.Signer()), Fp(w.c1)) << "signs with a CA the bundle does not lead with";
  EXPECT_EQ(pki::SplitBundle(leader.TrustBundle()).size(), 2u);
  leader.Poll(true, std::vector<std::string>{});
  EXPECT_EQ(PublishedFingerprints(&w.api), (std::vector<std::string>{Fp(w.c2), Fp(w.c1)}));
  EXPECT_EQ(Fp(leader.Signer()), Fp(w.c2));
  // A ConfigMap it cannot read: nothing written from an older copy.
  w.api.Script("GET", kConfigMap, kube::Result::FromHttp(500, testing::StatusBody(500, "InternalError", "").dump()));
  const int writes = w.api.Writes("/configmaps");
  leader.Poll(true, std::vector<std::string>{Fp(w.c2)});
  EXPECT_EQ(w.api.Writes("/configmaps"), writes);
}

TEST(NodeCa, ASecretThatCannotBeReadKeepsTheCaAndPublishesNothing) {
  FakeApi api;
  pki::Ca c1;
  ASSERT_TRUE(pki::Ca::Make("c1", 24h * 365, &c1).ok());
  StoreCa(&api, c1);
  NodeCa leader(&api, Config());
  ASSERT_TRUE(leader.Load().ok());
  leader.Poll(true, std::vector<std::string>{});
  api.Put(kSecret, {{"data", {{"tls.crt", "!!"}}}});
  api.Put(kConfigMap, {{"metadata", {{"name", "nodevol-ca"}}}, {"data", {{"ca.crt", "junk"}}}});
  const int writes = api.Writes("/configmaps");
  leader.Poll(true, std::vector<std::string>{});
  EXPECT_EQ(Fp(leader.Signer()), Fp(c1));
  EXPECT_EQ(api.Writes("/configmaps"), writes) << "a leader unsure of its CA must not publish";
}

TEST(NodeCa, ACaNearItsEndIsSaidOnceADay) {
  FakeApi api;
  pki::Ca c1;
  ASSERT_TRUE(pki::Ca::Make("c1", 24h * 10, &c1).ok());
  StoreCa(&api, c1);
  EventRecorder events(&api, "test");
  ProvisionerMetrics metrics;
  NodeCa ca(&api, Config());
  ASSERT_TRUE(ca.Load().ok());
  NodeCa::Hooks hooks;
  hooks.leading = [] { return true; };
  hooks.events = &events;
  hooks.metrics = &metrics;
  ca.Start(std::move(hooks));
  ca.Wake();
  for (int i = 0; i < 200 && api.EventReasons().empty(); ++i) std::this_thread::sleep_for(10ms);
  ca.Wake();
  std::this_thread::sleep_for(200ms);
  ca.Stop();
  EXPECT_EQ(api.EventReasons(), std::vector<std::string>{"NodeCaExpiring"});
  EXPECT_EQ(api.Writes("/events"), 1) << "once a day, not once a poll";
  std::string text = metrics.Render();
  auto not_after = std::chrono::system_clock::to_time_t(c1.not_after());
  EXPECT_NE(text.find("nodevol_provisioner_node_ca_expiry_timestamp_seconds " + std::to_string(not_after)),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace nodevol::provisioner
