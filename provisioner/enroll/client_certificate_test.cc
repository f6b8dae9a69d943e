// The provisioner's own client certificate: issued by the node CA for
// client auth only, its key private, renewed before it expires.
#include "enroll/client_certificate.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <thread>

#include "base/atomic_file.h"
#include "nodes/tls.h"
#include "pki/ca.h"
#include "pki/cert.h"

namespace nodevol::provisioner {
namespace {

using namespace std::chrono_literals;

TEST(ClientCertificate, IssuesAClientOnlyCertificateAndRenewsIt) {
  std::string dir = ::testing::TempDir() + "/client-cert-" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  pki::Ca ca;
  ASSERT_TRUE(pki::Ca::Make("node CA", 24h, &ca).ok());
  auto shared = std::make_shared<pki::Ca>(std::move(ca));
  std::string trusted = shared->cert_pem();
  ClientCertificate own([&] { return shared; }, [&] { return trusted; }, dir, 3s);
  ASSERT_TRUE(own.Issue().ok());
  nodes::TlsClientFiles files = own.files();
  EXPECT_TRUE(nodes::CheckTlsClientFiles(files).ok());  // what the provisioner checks at start
  std::string cert, key, bundle;
  ASSERT_TRUE(ReadWholeFile(files.cert, &cert).ok());
  ASSERT_TRUE(ReadWholeFile(files.key, &key).ok());
  ASSERT_TRUE(ReadWholeFile(files.ca, &bundle).ok());
  EXPECT_EQ(bundle, trusted);
  pki::CertFacts facts;
  ASSERT_TRUE(pki::ReadCertificate(cert, key, &facts).ok());
  EXPECT_TRUE(facts.dns_names.empty() && facts.ips.empty()) << "names nothing a server could be";
  EXPECT_NE(cert.find("BEGIN CERTIFICATE"), std::string::npos);
  struct stat st;
  ASSERT_EQ(::stat(files.key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  own.Start();
  std::this_thread::sleep_for(2500ms);  // due at 2 s
  own.Stop();
  std::string renewed, renewed_key;
  ASSERT_TRUE(ReadWholeFile(files.cert, &renewed).ok());
  ASSERT_TRUE(ReadWholeFile(files.key, &renewed_key).ok());
  EXPECT_NE(renewed, cert);
  EXPECT_TRUE(pki::ReadCertificate(renewed, renewed_key, &facts).ok());
  EXPECT_GT(facts.validity.not_after, std::chrono::system_clock::now() + 1s);
}

}  // namespace
}  // namespace nodevol::provisioner
