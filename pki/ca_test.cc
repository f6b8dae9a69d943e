// The CA signs what it is asked to and nothing more: a chain that
// OpenSSL's own verifier accepts for the right purpose only.
#include "pki/ca.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509_vfy.h>

#include "pki/cert.h"
#include "pki/openssl_ptr.h"

namespace nodevol::pki {
namespace {

using namespace std::chrono_literals;

CertPtr Parse(const std::string& pem) {
  BioPtr bio = ReadBio(pem);
  return CertPtr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

// X509_verify_cert of `leaf` against `ca` alone, for `purpose`.
bool Verifies(const std::string& leaf, const Ca& ca, int purpose) {
  CertPtr l = Parse(leaf), c = Parse(ca.cert_pem());
  std::unique_ptr<X509_STORE, Freer<X509_STORE, X509_STORE_free>> store(X509_STORE_new());
  X509_STORE_add_cert(store.get(), c.get());
  std::unique_ptr<X509_STORE_CTX, Freer<X509_STORE_CTX, X509_STORE_CTX_free>> ctx(X509_STORE_CTX_new());
  X509_STORE_CTX_init(ctx.get(), store.get(), l.get(), nullptr);
  X509_STORE_CTX_set_purpose(ctx.get(), purpose);
  return X509_verify_cert(ctx.get()) == 1;
}

TEST(Ca, SignsANodesRequestForServingOnly) {
  Ca ca;
  ASSERT_TRUE(Ca::Make("nodevol test CA", 24h, &ca).ok());
  std::string key, req, cert;
  ASSERT_TRUE(MakeKeyAndRequest("n1", {"n1"}, {"10.0.0.1"}, &key, &req).ok());
  Ca::Leaf leaf{"n1", {"n1"}, {"10.0.0.1"}, true, false, 2h};
  ASSERT_TRUE(ca.SignRequest(req, leaf, &cert).ok());
  EXPECT_TRUE(Verifies(cert, ca, X509_PURPOSE_SSL_SERVER));
  EXPECT_FALSE(Verifies(cert, ca, X509_PURPOSE_SSL_CLIENT));

  CertPtr c = Parse(cert);
  EXPECT_EQ(X509_check_host(c.get(), "n1", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_host(c.get(), "n2", 0, 0, nullptr), 0);
  EXPECT_EQ(X509_check_ip_asc(c.get(), "10.0.0.1", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(c.get(), "10.0.0.2", 0), 0);
  EXPECT_EQ(X509_check_ca(c.get()), 0);

  // The certificate carries the request's key, not a new one.
  BioPtr kb = ReadBio(key);
  KeyPtr k(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr));
  EXPECT_EQ(X509_check_private_key(c.get(), k.get()), 1);

  Validity v;
  ASSERT_TRUE(ReadValidity(cert, &v).ok());
  auto now = std::chrono::system_clock::now();
  EXPECT_LT(v.not_before, now - 4min);  // backdated for clock skew
  EXPECT_GT(v.not_after, now + 2h - 1min);
  EXPECT_LT(v.not_after, now + 2h + 1min);
}

TEST(Ca, IssuesAClientCertificateWithItsOwnKey) {
  Ca ca;
  ASSERT_TRUE(Ca::Make("nodevol test CA", 24h, &ca).ok());
  std::string key, cert;
  ASSERT_TRUE(ca.Issue({"nodevol-provisioner", {}, {}, false, true, 1h}, &key, &cert).ok());
  EXPECT_TRUE(Verifies(cert, ca, X509_PURPOSE_SSL_CLIENT));
  EXPECT_FALSE(Verifies(cert, ca, X509_PURPOSE_SSL_SERVER));
  EXPECT_NE(key.find("PRIVATE KEY"), std::string::npos);
}

// issue 60 item 7: a leaf that set neither usage was silently issued as a
// client certificate.
TEST(Ca, ALeafWithNoUsageIsRefused) {
  Ca ca;
  ASSERT_TRUE(Ca::Make("nodevol-ca", std::chrono::hours(24), &ca).ok());
  Ca::Leaf leaf;
  leaf.common_name = "nobody";
  leaf.lifetime = std::chrono::hours(1);
  std::string key, cert;
  Status st = ca.Issue(leaf, &key, &cert);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.message();
  EXPECT_TRUE(cert.empty());
}

TEST(Ca, LoadsWhatItWroteAndSignsTheSame) {
  Ca made, loaded;
  ASSERT_TRUE(Ca::Make("nodevol test CA", 24h, &made).ok());
  ASSERT_TRUE(Ca::Load(made.cert_pem(), made.key_pem(), &loaded).ok());
  EXPECT_EQ(loaded.cert_pem(), made.cert_pem());
  EXPECT_EQ(loaded.not_after(), made.not_after());
  std::string key, cert;
  ASSERT_TRUE(loaded.Issue({"x", {}, {}, false, true, 1h}, &key, &cert).ok());
  EXPECT_TRUE(Verifies(cert, made, X509_PURPOSE_SSL_CLIENT));
}

TEST(Ca, LoadRefusesWhatIsNotACa) {
  Ca a, b, out;
  ASSERT_TRUE(Ca::Make("a", 24h, &a).ok());
  ASSERT_TRUE(Ca::Make("b", 24h, &b).ok());
  EXPECT_EQ(Ca::Load("garbage", a.key_pem(), &out).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(Ca::Load(a.cert_pem(), "garbage", &out).code(), Status::Code::kInvalidArgument);
  Status mixed = Ca::Load(a.cert_pem(), b.key_pem(), &out);
  EXPECT_EQ(mixed.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(mixed.message().find("not the key"), std::string::npos) << mixed.message();
  std::string key, leaf;
  ASSERT_TRUE(a.Issue({"leaf", {}, {}, true, false, 1h}, &key, &leaf).ok());
  Status not_ca = Ca::Load(leaf, key, &out);
  EXPECT_NE(not_ca.message().find("CA:TRUE"), std::string::npos) << not_ca.message();
}

TEST(Ca, SignRefusesARequestNotSignedByItsKey) {
  Ca ca;
  ASSERT_TRUE(Ca::Make("nodevol test CA", 24h, &ca).ok());
  std::string cert;
  EXPECT_EQ(ca.SignRequest("-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n",
                           {"n1", {"n1"}, {}, true, false, 1h}, &cert)
                .code(),
            Status::Code::kInvalidArgument);
}

TEST(Cert, ReadValidityRefusesWhatIsNoCertificate) {
  Validity v;
  EXPECT_EQ(ReadValidity("", &v).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(ReadValidity("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", &v).code(),
            Status::Code::kInvalidArgument);
}

TEST(Cert, ReadCertificateGivesNamesAndChecksTheKey) {
  Ca ca;
  ASSERT_TRUE(Ca::Make("nodevol test CA", 24h, &ca).ok());
  std::string key, req, cert, other_key, other_req;
  ASSERT_TRUE(MakeKeyAndRequest("n1", {"n1"}, {"10.0.0.1", "fd00::7"}, &key, &req).ok());
  ASSERT_TRUE(ca.SignRequest(req, Ca::Leaf{"n1", {"n1"}, {"10.0.0.1", "fd00::7"}, true, false, 2h}, &cert).ok());
  CertFacts f;
  ASSERT_TRUE(ReadCertificate(cert, key, &f).ok());
  EXPECT_EQ(f.dns_names, std::vector<std::string>{"n1"});
  EXPECT_EQ(f.ips, (std::vector<std::string>{"10.0.0.1", "fd00::7"}));
  EXPECT_GT(f.validity.not_after, std::chrono::system_clock::now() + 1h);

  ASSERT_TRUE(MakeKeyAndRequest("n1", {"n1"}, {}, &other_key, &other_req).ok());
  Status st = ReadCertificate(cert, other_key, &f);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("not the certificate's"), std::string::npos) << st.message();
  EXPECT_EQ(ReadCertificate(cert, "junk", &f).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(ReadCertificate("junk", key, &f).code(), Status::Code::kInvalidArgument);
}

TEST(Cert, VerifyChainTellsTheCaApart) {
  Ca ca, other;
  ASSERT_TRUE(Ca::Make("CA one", 24h, &ca).ok());
  ASSERT_TRUE(Ca::Make("CA two", 24h, &other).ok());
  std::string key, cert;
  ASSERT_TRUE(ca.Issue({"n1", {"n1"}, {}, true, false, 1h}, &key, &cert).ok());
  EXPECT_TRUE(VerifyChain(cert, ca.cert_pem()).ok());
  EXPECT_TRUE(VerifyChain(cert, other.cert_pem() + ca.cert_pem()).ok());  // a bundle during a CA change
  Status st = VerifyChain(cert, other.cert_pem());
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("does not chain"), std::string::npos) << st.message();
  EXPECT_EQ(VerifyChain(cert, "").code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace nodevol::pki
