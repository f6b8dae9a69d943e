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
#include "pki/bundle.h"
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
  // Signs with `ca` (an operator's, loaded from their Secret).
  TestSigner(FakeApi* api, std::chrono::seconds lifetime, pki::Ca ca)
      : api_(api), lifetime_(lifetime), ca_(std::move(ca)) {
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
  // notBefore this far back (negative: in the future, as a node whose
  // clock is behind the signer's sees it).
  void Backdate(std::chrono::seconds b) { backdate_ = b.count(); }

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
          pki::Ca::Leaf leaf{"n1", {"n1"}, ips_, true, false, lifetime_};
          leaf.backdate = std::chrono::seconds(backdate_.load());
          ASSERT_TRUE(ca_.SignRequest(request, leaf, &cert).ok());
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
  std::atomic<long> backdate_{300};
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
  // An enroller that checks the bundle every `recheck`, started.
  std::unique_ptr<Enroller> StartWithRecheck(std::chrono::seconds recheck, std::atomic<int>* ready) {
    EnrollConfig c = Config();
    c.recheck = recheck;
    auto e = std::make_unique<Enroller>(&api_, c, [ready] { ++*ready; });
    e->Start();
    return e;
  }
  static bool WaitFor(const std::function<bool()>& f, std::chrono::milliseconds limit = 10s) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (!f()) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(10ms);
    }
    return true;
  }
  // Enrolls with a 1 s recheck, waits out two rechecks after the first
  // certificate, and says how many CSRs were made in all (1 when the node
  // kept what it got).
  int CsrsOverTwoRechecks() {
    std::atomic<int> ready{0};
    EnrollConfig c = Config();
    c.recheck = 1s;
    Enroller e(&api_, c, [&] { ++ready; });
    e.Start();
    if (!WaitFor([&] { return ready == 1; })) return -1;
    std::this_thread::sleep_for(2500ms);
    e.Stop();
    return CsrsMade();
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
  auto e = StartWithRecheck(1s, &ready);
  ASSERT_TRUE(WaitFor([&] { return ready == 1; }));
  std::string new_ca = signer.ReplaceCa();
  api_.Put("/api/v1/namespaces/nodevol-system/configmaps/nodevol-ca", {{"data", {{"ca.crt", new_ca}}}});
  std::string cert;
  ASSERT_TRUE(WaitFor([&] {
    return signer.signed_count() >= 2 && ReadWholeFile(dir_ + "/tls.crt", &cert).ok() && pki::VerifyChain(cert, new_ca).ok();
  }));
  e->Stop();
  std::string bundle;
  ASSERT_TRUE(ReadWholeFile(dir_ + "/ca.crt", &bundle).ok());
  EXPECT_EQ(bundle, new_ca);
  EXPECT_EQ(ready, 1);
}

// A rotation (provisioner/enroll/ca_rotation.h): the bundle holds the new
// CA first and the old after it. The node trusts both, asks once for a
// certificate of the new one (not on every pass), and says on its Node
// which CA it serves from. A bundle whose first CA signed what it holds
// asks for nothing, whatever else it lists.
TEST_F(EnrollerTest, ARotationBundleMeansOneNewCertificateAndSaysWhichCa) {
  TestSigner signer(&api_, 1h);
  const std::string old_ca = signer.ca().cert_pem();
  PublishCa(signer.ca());
  std::atomic<int> ready{0};
  auto e = StartWithRecheck(1s, &ready);
  ASSERT_TRUE(WaitFor([&] { return ready == 1; }));
  e->Announce("0.0.0.0", 9809);
  auto serving_ca = [&] {
    json a = api_.Object("/api/v1/nodes/n1")["metadata"]["annotations"];
    return a.is_object() ? a.value(kServingCaAnnotation, "") : "";
  };
  ASSERT_TRUE(WaitFor([&] { return serving_ca() == pki::Fingerprint(old_ca); })) << serving_ca();
  std::string new_ca = signer.ReplaceCa();
  api_.Put("/api/v1/namespaces/nodevol-system/configmaps/nodevol-ca", {{"data", {{"ca.crt", new_ca + old_ca}}}});
  ASSERT_TRUE(WaitFor([&] { return serving_ca() == pki::Fingerprint(new_ca); })) << serving_ca();
  std::this_thread::sleep_for(2500ms);  // two more rechecks
  e->Stop();
  EXPECT_EQ(CsrsMade(), 2) << "one certificate of the old CA, one of the new, nothing more";
  std::string bundle, cert;
  ASSERT_TRUE(ReadWholeFile(dir_ + "/ca.crt", &bundle).ok());
  EXPECT_EQ(bundle, new_ca + old_ca) << "both trusted while the rotation runs";
  ASSERT_TRUE(ReadWholeFile(dir_ + "/tls.crt", &cert).ok());
  EXPECT_TRUE(pki::VerifyChain(cert, new_ca).ok());
}

TEST_F(EnrollerTest, AnOldCaLaterInTheBundleAsksForNothing) {
  TestSigner signer(&api_, 1h);
  pki::Ca retired;
  ASSERT_TRUE(pki::Ca::Make("retired", 24h, &retired).ok());
  api_.Put("/api/v1/namespaces/nodevol-system/configmaps/nodevol-ca",
           {{"data", {{"ca.crt", signer.ca().cert_pem() + retired.cert_pem()}}}});
  EXPECT_EQ(CsrsOverTwoRechecks(), 1);
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
  EXPECT_EQ(CsrsOverTwoRechecks(), 1);
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

// Runs `command` through the shell, for openssl(1) in the tests below.
void Shell(const std::string& command) { ASSERT_EQ(std::system(command.c_str()), 0) << command; }

// issue 60 item 2: an operator CA that is an intermediate of their own
// root (a cert-manager isCA Certificate from a CA issuer): the bundle
// holds the intermediate alone, and pki::VerifyChain never accepted the
// node's certificate, so every pass asked for a new one.
TEST_F(EnrollerTest, AnIntermediateCaIsTrustedAsItIs) {
  std::string d = dir_ + "-ca";
  std::filesystem::create_directories(d);
  const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
  Shell("cd " + d + " && openssl req -x509" + ec + " -keyout root.key -out root.crt -subj /CN=root -days 2"
      " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null");
  Shell("cd " + d + " && openssl req" + ec + " -keyout int.key -out int.csr -subj /CN=intermediate 2>/dev/null");
  Shell("cd " + d + " && printf 'basicConstraints=critical,CA:TRUE\\nkeyUsage=critical,keyCertSign,cRLSign,"
      "digitalSignature\\nsubjectKeyIdentifier=hash\\nauthorityKeyIdentifier=keyid\\n' >ext &&"
      " openssl x509 -req -in int.csr -CA root.crt -CAkey root.key -CAcreateserial -days 1 -extfile ext"
      " -out int.crt 2>/dev/null");
  std::string int_cert, int_key;
  ASSERT_TRUE(ReadWholeFile(d + "/int.crt", &int_cert).ok());
  ASSERT_TRUE(ReadWholeFile(d + "/int.key", &int_key).ok());
  pki::Ca intermediate;
  ASSERT_TRUE(pki::Ca::Load(int_cert, int_key, &intermediate).ok());
  TestSigner signer(&api_, 1h, std::move(intermediate));
  PublishCa(signer.ca());
  EXPECT_EQ(CsrsOverTwoRechecks(), 1)
      << "the node re-enrolled: its certificate was not seen to chain to the intermediate";
  std::string cert;
  ASSERT_TRUE(ReadWholeFile(dir_ + "/tls.crt", &cert).ok());
  EXPECT_TRUE(pki::VerifyChain(cert, int_cert).ok());
  std::string root;
  ASSERT_TRUE(ReadWholeFile(d + "/root.crt", &root).ok());
  EXPECT_TRUE(pki::VerifyChain(cert, root + int_cert).ok()) << "root and intermediate in one bundle";
  EXPECT_FALSE(pki::VerifyChain(cert, root).ok()) << "the root alone lacks the intermediate";
  std::filesystem::remove_all(d);
}

// issue 60 item 3: a node whose clock is behind the signer's by more than
// the 5-minute backdate got a certificate not yet valid by its clock, and
// asked for another on every pass, saying the CA was replaced.
TEST_F(EnrollerTest, ACertificateNotYetValidHereIsKept) {
  TestSigner signer(&api_, 2h);
  signer.Backdate(-1h);
  PublishCa(signer.ca());
  EXPECT_EQ(CsrsOverTwoRechecks(), 1);
  // Another CA is still another CA, at the certificate's notBefore too.
  std::string cert;
  ASSERT_TRUE(ReadWholeFile(dir_ + "/tls.crt", &cert).ok());
  pki::Ca other;
  ASSERT_TRUE(pki::Ca::Make("other", 24h, &other).ok());
  EXPECT_FALSE(pki::VerifyChain(cert, other.cert_pem(), std::chrono::system_clock::now() + 90min).ok());
  EXPECT_TRUE(pki::VerifyChain(cert, signer.ca().cert_pem(), std::chrono::system_clock::now() + 90min).ok());
}

// issue 60 item 5: when the signed pair could not be written (ENOSPC,
// EROFS; here tls.crt is a directory, which a rename cannot replace even
// as root), every backoff step made a new request that was signed and
// thrown away.
TEST_F(EnrollerTest, APairThatCannotBeWrittenIsWrittenLaterNotAskedForAgain) {
  TestSigner signer(&api_, 1h);
  PublishCa(signer.ca());
  std::filesystem::create_directories(dir_ + "/tls.crt/in-the-way");
  std::atomic<int> ready{0};
  Enroller e(&api_, Config(), [&] { ++ready; });
  e.Start();
  ASSERT_TRUE(WaitFor([&] { return signer.signed_count() >= 1; }));
  std::this_thread::sleep_for(3500ms);  // passes at +1 s and +3 s (backoff)
  EXPECT_EQ(ready, 0);
  EXPECT_EQ(CsrsMade(), 1) << "a new request on every backoff step";
  std::filesystem::remove_all(dir_ + "/tls.crt");
  ASSERT_TRUE(WaitFor([&] { return ready == 1; }, 15s));
  e.Stop();
  EXPECT_EQ(CsrsMade(), 1);
  pki::CertFacts f;
  std::chrono::system_clock::time_point written;
  EXPECT_TRUE(Config().files.Load("n1", &f, &written).ok()) << "the kept pair is what was written";
}

}  // namespace
}  // namespace nodevol::enroll
