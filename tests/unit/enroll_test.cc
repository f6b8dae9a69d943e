// nodevold's enrollment against an in-memory apiserver and a signer made
// of nodevol's own CA (the provisioner's side is tested in
// provisioner/enroll/; the two together, with a real apiserver, in
// tests/k8s/enroll_test.sh).
#include "enroll/enroller.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "base/atomic_file.h"
#include "kube/base64.h"
#include "kube/fake_api.h"
#include "pki/ca.h"
#include "pki/cert.h"
#include "pki/openssl_ptr.h"

namespace nodevol::enroll {
namespace {

using namespace std::chrono_literals;
using kube::testing::FakeApi;
using nlohmann::json;

constexpr char kCsrs[] = "/apis/certificates.k8s.io/v1/certificatesigningrequests";

// Answers the node's requests the way nodevol-provisioner would: signs
// each (or denies it), with this lifetime.
class TestSigner {
 public:
  TestSigner(FakeApi* api, std::chrono::seconds lifetime) : api_(api), lifetime_(lifetime) {
    EXPECT_TRUE(pki::Ca::Make("test CA", 24h, &ca_).ok());
    thread_ = std::thread([this] { Run(); });
  }
  ~TestSigner() {
    stop_ = true;
    thread_.join();
  }
  const pki::Ca& ca() const { return ca_; }
  // A new CA from now on (as after an operator replaced the Secret).
  std::string ReplaceCa() {
    pki::Ca fresh;
    EXPECT_TRUE(pki::Ca::Make("replacement CA", 24h, &fresh).ok());
    std::lock_guard<std::mutex> l(mu_);
    ca_ = std::move(fresh);
    return ca_.cert_pem();
  }
  void Deny(bool deny) { deny_ = deny; }
  // The addresses it writes (what the real signer takes from the Node).
  void SignIps(std::vector<std::string> ips) {
    std::lock_guard<std::mutex> l(mu_);
    ips_ = std::move(ips);
  }
  int signed_count() const { return signed_; }

 private:
  void Run() {
    while (!stop_) {
      for (int i = 1; i <= 50; ++i) {
        std::string path = std::string(kCsrs) + "/nodevol-n1-" + std::to_string(i);
        if (!api_->Has(path)) break;
        json csr = api_->Object(path);
        if (csr.contains("status")) continue;
        std::string request;
        ASSERT_TRUE(kube::DecodeBase64(csr["spec"]["request"], &request));
        if (deny_) {
          csr["status"] = {{"conditions", {{{"type", "Denied"}, {"reason", "NotItsOwnName"}, {"message", "no"}}}}};
        } else {
          std::string cert;
          std::lock_guard<std::mutex> l(mu_);
          ASSERT_TRUE(ca_.SignRequest(request, {"n1", {"n1"}, ips_, true, false, lifetime_}, &cert).ok());
          csr["status"] = {{"certificate", kube::EncodeBase64(cert)}};
          ++signed_;
        }
        api_->Put(path, csr);
      }
      std::this_thread::sleep_for(20ms);
    }
  }
  FakeApi* api_;
  std::chrono::seconds lifetime_;
  std::mutex mu_;
  pki::Ca ca_;
  std::vector<std::string> ips_ = {"10.0.0.1"};
  std::atomic<bool> stop_{false}, deny_{false};
  std::atomic<int> signed_{0};
  std::thread thread_;
};

class EnrollerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/enroll-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    api_.Put("/api/v1/nodes/n1", {{"metadata", {{"name", "n1"}}},
                                   {"status", {{"addresses", {{{"type", "InternalIP"}, {"address", "10.0.0.1"}},
                                                              {{"type", "Hostname"}, {"address", "n1"}}}}}}});
    api_.Script("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                kube::Result::FromHttp(404, R"({"kind":"Status","code":404,"reason":"NotFound"})"));
  }
  void PublishCa(const pki::Ca& ca) {
    api_.Put("/api/v1/namespaces/nodevol-system/configmaps/nodevol-ca", {{"data", {{"ca.crt", ca.cert_pem()}}}});
  }
  EnrollConfig Config() {
    EnrollConfig c;
    c.node = "n1";
    c.files.dir = dir_;
    return c;
  }
  static bool WaitFor(const std::function<bool()>& f, std::chrono::milliseconds limit = 10s) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (!f()) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(10ms);
    }
    return true;
  }
  int CsrsMade() {
    int n = 0;
    for (const auto& c : api_.Calls()) n += c.verb == "POST" && c.path == kCsrs;
    return n;
  }
  std::string dir_;
  FakeApi api_;
};

TEST_F(EnrollerTest, EnrollsThenAnnouncesAndARestartKeepsTheCertificate) {
  TestSigner signer(&api_, 1h);
  PublishCa(signer.ca());
  std::atomic<int> ready{0};
  Enroller e(&api_, Config(), [&] { ++ready; });
  EXPECT_FALSE(e.ready());
  e.Start();
  ASSERT_TRUE(WaitFor([&] { return ready == 1; }));
  e.Announce("0.0.0.0", 9809);
  ASSERT_TRUE(WaitFor([&] {
    json n = api_.Object("/api/v1/nodes/n1");
    return n["metadata"].contains("annotations");
  }));
  e.Stop();
  json node = api_.Object("/api/v1/nodes/n1");
  EXPECT_EQ(node["metadata"]["annotations"][kEndpointAnnotation], "10.0.0.1:9809");
  EXPECT_EQ(node["metadata"]["labels"]["nodevol.io/node"], "true");
  EXPECT_EQ(ready, 1);

  // What was asked: the node's own name and address, server auth only.
  json csr = api_.Object(std::string(kCsrs) + "/nodevol-n1-1");
  EXPECT_EQ(csr["spec"]["signerName"], kSignerName);
  EXPECT_EQ(csr["spec"]["usages"], json({"digital signature", "server auth"}));
  EXPECT_EQ(csr["spec"]["expirationSeconds"], 7 * 24 * 3600);

  // The key never left: it is in the file only, 0600.
  struct stat st;
  ASSERT_EQ(::stat((dir_ + "/tls.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  pki::CertFacts f;
  std::chrono::system_clock::time_point written;
  ASSERT_TRUE(Config().files.Load("n1", &f, &written).ok());
  EXPECT_EQ(f.ips, std::vector<std::string>{"10.0.0.1"});

  // A restart serves at once with what it holds, and asks for nothing.
  std::atomic<int> ready2{0};
  Enroller again(&api_, Config(), [&] { ++ready2; });
  EXPECT_TRUE(again.ready());
  again.Start();
  again.Announce("0.0.0.0", 9809);
  std::this_thread::sleep_for(300ms);
  again.Stop();
  EXPECT_EQ(ready2, 0);
  EXPECT_EQ(CsrsMade(), 1);
}

TEST_F(EnrollerTest, WaitsForTheSignerWithoutFailing) {
  // No CA published and no signer yet: the node waits.
  std::atomic<int> ready{0};
  Enroller e(&api_, Config(), [&] { ++ready; });
  e.Start();
  std::this_thread::sleep_for(1500ms);
  EXPECT_EQ(ready, 0);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/tls.crt"));
  TestSigner signer(&api_, 1h);
  PublishCa(signer.ca());
  ASSERT_TRUE(WaitFor([&] { return ready == 1; }, 20s));
  e.Stop();
}

TEST_F(EnrollerTest, ADeniedRequestWritesNothing) {
  TestSigner signer(&api_, 1h);
  signer.Deny(true);
  PublishCa(signer.ca());
  std::atomic<int> ready{0};
  Enroller e(&api_, Config(), [&] { ++ready; });
  e.Start();
  ASSERT_TRUE(WaitFor([&] { return api_.Object(std::string(kCsrs) + "/nodevol-n1-1").contains("status"); }));
  std::this_thread::sleep_for(2500ms);  // past a short backoff's retries
  e.Stop();
  EXPECT_EQ(ready, 0);
  EXPECT_EQ(CsrsMade(), 1) << "a refused node asks again only after the recheck interval";
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/tls.crt"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/tls.key"));
}

TEST_F(EnrollerTest, RenewsAtTwoThirdsOfTheLifetime) {
  // Certificates name whole seconds: 6 s leaves the renewal (due after 4 s)
  // a margin over the request's first read (250 ms) and a loaded machine.
  TestSigner signer(&api_, 6s);
  PublishCa(signer.ca());
  std::atomic<int> ready{0};
  Enroller e(&api_, Config(), [&] { ++ready; });
  e.Start();
  ASSERT_TRUE(WaitFor([&] { return ready == 1; }));
  std::string first;
  ASSERT_TRUE(ReadWholeFile(dir_ + "/tls.crt", &first).ok());
  auto first_expiry = e.not_after();
  // Due 4 s after issue, asked for and written before the first expires.
  ASSERT_TRUE(WaitFor([&] { return signer.signed_count() >= 2 && e.not_after() > first_expiry; }, 15s));
  EXPECT_LT(std::chrono::system_clock::now(), first_expiry + 1s);
  e.Stop();
  std::string second;
  ASSERT_TRUE(ReadWholeFile(dir_ + "/tls.crt", &second).ok());
  EXPECT_NE(first, second);
  pki::CertFacts f;
  std::chrono::system_clock::time_point written;
  EXPECT_TRUE(Config().files.Load("n1", &f, &written).ok());  // the new key with the new certificate
  EXPECT_EQ(ready, 1);
}

TEST_F(EnrollerTest, ANewCaMeansANewCertificate) {
  TestSigner signer(&api_, 1h);
  PublishCa(signer.ca());
  std::atomic<int> ready{0};
  EnrollConfig c = Config();
  c.recheck = 1s;
  Enroller e(&api_, c, [&] { ++ready; });
  e.Start();
  ASSERT_TRUE(WaitFor([&] { return ready == 1; }));
  std::string new_ca = signer.ReplaceCa();
  api_.Put("/api/v1/namespaces/nodevol-system/configmaps/nodevol-ca", {{"data", {{"ca.crt", new_ca}}}});
  std::string cert;
  ASSERT_TRUE(WaitFor([&] {
    return signer.signed_count() >= 2 && ReadWholeFile(dir_ + "/tls.crt", &cert).ok() && pki::VerifyChain(cert, new_ca).ok();
  }));
  e.Stop();
  std::string bundle;
  ASSERT_TRUE(ReadWholeFile(dir_ + "/ca.crt", &bundle).ok());
  EXPECT_EQ(bundle, new_ca);
  EXPECT_EQ(ready, 1);
}

// issue 60 item 4: the Node's address as it spells it (FD00::1) was
// compared as text with the certificate's (fd00::1): a new key and CSR on
// every pass, for ever.
TEST_F(EnrollerTest, AnAddressSpelledOtherwiseIsTheSameAddress) {
  api_.Put("/api/v1/nodes/n1", {{"metadata", {{"name", "n1"}}},
                                 {"status", {{"addresses", {{{"type", "InternalIP"}, {"address", "FD00:0::1"}}}}}}});
  TestSigner signer(&api_, 1h);
  signer.SignIps({"fd00::1"});
  PublishCa(signer.ca());
  std::atomic<int> ready{0};
  EnrollConfig c = Config();
  c.recheck = 1s;
  Enroller e(&api_, c, [&] { ++ready; });
  e.Start();
  ASSERT_TRUE(WaitFor([&] { return ready == 1; }));
  std::this_thread::sleep_for(2500ms);  // two rechecks
  e.Stop();
  EXPECT_EQ(CsrsMade(), 1);
}

TEST_F(EnrollerTest, FilesOfAnotherNodeAreNotServed) {
  TestSigner signer(&api_, 1h);
  PublishCa(signer.ca());
  EnrollConfig other = Config();
  other.node = "n2";
  std::string key, req, cert;
  ASSERT_TRUE(pki::MakeKeyAndRequest("n2", {"n2"}, {}, &key, &req).ok());
  ASSERT_TRUE(signer.ca().SignRequest(req, {"n2", {"n2"}, {}, true, false, 1h}, &cert).ok());
  ASSERT_TRUE(other.files.WritePair(key, cert).ok());
  bool changed;
  ASSERT_TRUE(other.files.WriteCaBundle(signer.ca().cert_pem(), &changed).ok());
  Enroller e(&api_, Config(), nullptr);
  EXPECT_FALSE(e.ready());
  pki::CertFacts f;
  std::chrono::system_clock::time_point written;
  Status st = Config().files.Load("n1", &f, &written);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("does not name node n1"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace nodevol::enroll
