// The signer's turn on a CSR against a fake apiserver: approve and sign
// what the policy allows, deny the rest with a reason and an event, never
// sign twice, never sign what someone else approved against the policy.
#include "enroll/sign_csr.h"

#include <gtest/gtest.h>

#include "controller/events.h"
#include "controller/fakes_test.h"
#include "enroll/csr_rate_limit.h"
#include "kube/base64.h"
#include "pki/ca.h"
#include "pki/cert.h"

namespace nodevol::provisioner {
namespace {

using namespace std::chrono_literals;
using testing::FakeApi;
using json = nlohmann::json;

constexpr char kCsrObjectPath[] = "/apis/certificates.k8s.io/v1/certificatesigningrequests/csr-n1";

struct SignFixture {
  FakeApi api;
  pki::Ca ca;
  EventRecorder events{&api, "test"};
  SignerConfig config;
  int puts = 0;
  SignFixture() {
    EXPECT_TRUE(pki::Ca::Make("test CA", 24h, &ca).ok());
    config.ca = [this] { return std::shared_ptr<const pki::Ca>(&ca, [](const pki::Ca*) {}); };
    config.max_lifetime = 48h;
    config.node_lookup = [](const std::string& n, NodeFacts* facts) {
      if (n != "n1") return Status::NotFound("no Node " + n);
      facts->internal_ips = {"10.0.0.1"};
      facts->storage_node = true;
      return Status::Ok();
    };
    config.events = &events;
  }
  // A CSR as the apiserver stores it, for `cn` asked by `user`.
  json Put(const std::string& cn, const std::string& user = "system:node:n1", int64_t seconds = 0) {
    std::string key, req;
    EXPECT_TRUE(pki::MakeKeyAndRequest(cn, {cn}, {}, &key, &req).ok());
    json csr = {{"apiVersion", "certificates.k8s.io/v1"},
                {"kind", "CertificateSigningRequest"},
                {"metadata", {{"name", "csr-n1"}, {"uid", "u" + std::to_string(++puts)}, {"resourceVersion", "1"}}},
                {"spec",
                 {{"signerName", kNodeServingSigner},
                  {"username", user},
                  {"groups", {"system:nodes", "system:authenticated"}},
                  {"usages", {"digital signature", "server auth"}},
                  {"request", kube::EncodeBase64(req)}}}};
    if (seconds) csr["spec"]["expirationSeconds"] = seconds;
    api.Put(kCsrObjectPath, csr);
    return csr;
  }
  SignOutcome Sign(const json& csr, Status* st = nullptr) {
    SignOutcome o;
    Status s = SignCsr(&api, config, csr, &o);
    if (st) *st = s;
    else EXPECT_TRUE(s.ok()) << s.ToString();
    return o;
  }
  json CsrStatus() {
    json csr = api.Object(kCsrObjectPath);
    return csr.is_object() && csr.contains("status") && csr["status"].is_object() ? csr["status"] : json::object();
  }
  std::string Certificate() {
    std::string pem;
    kube::DecodeBase64(CsrStatus().value("certificate", ""), &pem);
    return pem;
  }
  std::vector<std::string> Conditions() {
    std::vector<std::string> out;
    json status = CsrStatus();
    if (status.contains("conditions"))
      for (const auto& c : status["conditions"]) out.push_back(c.value("type", "") + "/" + c.value("reason", ""));
    return out;
  }
};

TEST(SignCsr, ApprovesAndSignsANodesOwnRequestOnce) {
  SignFixture f;
  EXPECT_EQ(f.Sign(f.Put("n1", "system:node:n1", 3600)), SignOutcome::kSigned);
  EXPECT_EQ(f.Conditions(), std::vector<std::string>{"Approved/NodevolNodeServing"});
  std::string cert = f.Certificate();
  ASSERT_NE(cert.find("BEGIN CERTIFICATE"), std::string::npos);
  pki::Validity v;
  ASSERT_TRUE(pki::ReadValidity(cert, &v).ok());
  auto now = std::chrono::system_clock::now();
  EXPECT_GT(v.not_after, now + 59min);
  EXPECT_LT(v.not_after, now + 61min);

  // The signed object again (a watch event, a resync): nothing is written.
  int writes = f.api.Writes("certificatesigningrequests");
  EXPECT_EQ(f.Sign(f.api.Object(kCsrObjectPath)), SignOutcome::kIgnored);
  EXPECT_EQ(f.api.Writes("certificatesigningrequests"), writes);
  EXPECT_TRUE(f.api.EventReasons().empty());
}

TEST(SignCsr, ClampsTheLifetime) {
  SignFixture f;
  f.Sign(f.Put("n1", "system:node:n1", 60));
  pki::Validity v;
  ASSERT_TRUE(pki::ReadValidity(f.Certificate(), &v).ok());
  EXPECT_GT(v.not_after, std::chrono::system_clock::now() + 9min);  // the API's minimum, 10 min

  SignFixture g;
  g.Sign(g.Put("n1", "system:node:n1", 3600 * 24 * 365));
  ASSERT_TRUE(pki::ReadValidity(g.Certificate(), &v).ok());
  EXPECT_LT(v.not_after, std::chrono::system_clock::now() + 49h);  // max_lifetime
}

TEST(SignCsr, DeniesWithAReasonAndAnEventAndSignsNothing) {
  SignFixture f;
  EXPECT_EQ(f.Sign(f.Put("n2")), SignOutcome::kDenied);
  EXPECT_EQ(f.Conditions(), std::vector<std::string>{"Denied/WrongSubject"});
  EXPECT_TRUE(f.Certificate().empty());
  EXPECT_EQ(f.api.EventReasons(), std::vector<std::string>{"CertificateDenied"});
  // Denied stays denied.
  EXPECT_EQ(f.Sign(f.api.Object(kCsrObjectPath)), SignOutcome::kIgnored);

  SignFixture g;
  EXPECT_EQ(g.Sign(g.Put("n1", "system:serviceaccount:default:x")), SignOutcome::kDenied);
  EXPECT_EQ(g.Conditions(), std::vector<std::string>{"Denied/NotANode"});
}

TEST(SignCsr, DoesNotSignWhatSomeoneElseApprovedAgainstItsPolicy) {
  SignFixture f;
  json csr = f.Put("n2");  // n1 asking for n2's name
  csr["status"]["conditions"] = {{{"type", "Approved"}, {"status", "True"}, {"reason", "ByHand"}}};
  f.api.Put(kCsrObjectPath, csr);
  EXPECT_EQ(f.Sign(csr), SignOutcome::kFailed);
  EXPECT_EQ(f.Conditions(), (std::vector<std::string>{"Approved/ByHand", "Failed/WrongSubject"}));
  EXPECT_TRUE(f.Certificate().empty());
}

TEST(SignCsr, IgnoresOtherSigners) {
  SignFixture f;
  json csr = f.Put("n1");
  csr["spec"]["signerName"] = "kubernetes.io/kubelet-serving";
  EXPECT_EQ(f.Sign(csr), SignOutcome::kIgnored);
  EXPECT_EQ(f.api.Writes("certificatesigningrequests"), 0);
}

TEST(SignCsr, AConflictIsReturnedForARetry) {
  SignFixture f;
  json csr = f.Put("n1");
  f.api.Script("PUT", std::string(kCsrObjectPath) + "/approval",
               kube::Result::FromHttp(409, testing::StatusBody(409, "Conflict", "modified").dump()));
  Status st;
  f.Sign(csr, &st);
  EXPECT_EQ(st.code(), Status::Code::kAborted) << st.ToString();
  EXPECT_TRUE(f.Certificate().empty());
  // The retry, from the object as it is now, signs.
  EXPECT_EQ(f.Sign(f.api.Object(kCsrObjectPath)), SignOutcome::kSigned);
}

// issue 60: one node's requests were unbounded against the signer's
// single worker. Past the limit a request is denied before the Node is
// read, with a reason and an event; other nodes are not affected; the
// hour passing lets the node in again.
TEST(SignCsr, ANodePastItsHourlyLimitIsDeniedOthersAreNot) {
  SignFixture f;
  auto now = std::chrono::steady_clock::now();
  CsrRateLimit limit(3, [&] { return now; });
  f.config.rate_limit = &limit;
  int node_reads = 0;
  auto lookup = f.config.node_lookup;
  f.config.node_lookup = [&](const std::string& n, NodeFacts* facts) {
    ++node_reads;
    if (n == "n2") {
      facts->internal_ips = {"10.0.0.2"};
      facts->storage_node = true;
      return Status::Ok();
    }
    return lookup(n, facts);
  };
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(f.Sign(f.Put("n1")), SignOutcome::kSigned) << i;
    now += 1min;
  }
  EXPECT_EQ(node_reads, 6);  // checked before the approval, and before signing
  json fourth = f.Put("n1");
  EXPECT_EQ(f.Sign(fourth), SignOutcome::kDenied);
  EXPECT_EQ(node_reads, 6) << "a request past the limit costs no read of the Node";
  EXPECT_EQ(f.Conditions(), std::vector<std::string>{"Denied/TooManyRequests"});
  auto reasons = f.api.EventReasons();
  EXPECT_NE(std::find(reasons.begin(), reasons.end(), "CertificateDenied"), reasons.end());
  EXPECT_EQ(f.Sign(f.Put("n2", "system:node:n2")), SignOutcome::kSigned) << "another node";
  // Denied requests count too: a flood of bad ones is a flood.
  CsrRateLimit strict(2, [&] { return now; });
  f.config.rate_limit = &strict;
  EXPECT_EQ(f.Sign(f.Put("n1", "system:node:n2")), SignOutcome::kDenied);  // another node's name
  EXPECT_EQ(f.Sign(f.Put("n1", "system:node:n2")), SignOutcome::kDenied);
  int reads = node_reads;
  EXPECT_EQ(f.Sign(f.Put("n2", "system:node:n2")), SignOutcome::kDenied);
  EXPECT_EQ(node_reads, reads) << "a third request in the hour is not even checked";
  EXPECT_EQ(f.Conditions(), std::vector<std::string>{"Denied/TooManyRequests"});
  // One someone else approved is Failed past the limit, not signed.
  json approved = f.Put("n2", "system:node:n2");
  approved["status"]["conditions"] = {{{"type", "Approved"}, {"status", "True"}, {"reason", "ByHand"}}};
  f.api.Put(kCsrObjectPath, approved);
  EXPECT_EQ(f.Sign(approved), SignOutcome::kFailed);
  EXPECT_TRUE(f.Certificate().empty());
  f.config.rate_limit = &limit;
  now += 57min;  // the first of n1's three is an hour old, the others not yet
  EXPECT_EQ(f.Sign(f.Put("n1")), SignOutcome::kSigned);
  EXPECT_EQ(f.Sign(f.Put("n1")), SignOutcome::kDenied);
  CsrRateLimit none(0);
  f.config.rate_limit = &none;
  EXPECT_EQ(f.Sign(f.Put("n1")), SignOutcome::kSigned) << "0: no limit";
}

}  // namespace
}  // namespace nodevol::provisioner
