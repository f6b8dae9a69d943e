// httpd's TLS (the scheduler extender's transport): a client with a
// certificate from the client CA is served; one without a certificate,
// with one from another CA, or speaking plain HTTP gets nothing and the
// server keeps serving. Real TLS over loopback, libcurl as the client
// (what kube-scheduler's Go client does: verify the server against a CA,
// present a client certificate).
#include <curl/curl.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "httpd/http_server.h"
#include "test_certs.h"

namespace nodevol::testing {
namespace {

namespace fs = std::filesystem;

size_t Collect(char* p, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(p, size * n);
  return size * n;
}

struct Answer {
  CURLcode code = CURLE_OK;
  long status = 0;
  std::string body;
};

Answer Post(const std::string& url, const std::string& ca, const TestCert* client) {
  Answer a;
  CURL* c = curl_easy_init();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, "{\"x\":1}");
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
  if (!ca.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, ca.c_str());
  if (client) {
    curl_easy_setopt(c, CURLOPT_SSLCERT, client->cert.c_str());
    curl_easy_setopt(c, CURLOPT_SSLKEY, client->key.c_str());
  }
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &a.body);
  a.code = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a.status);
  curl_easy_cleanup(c);
  return a;
}

class HttpsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("https-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    ca_ = MakeCa(dir_, "ext");
    other_ca_ = MakeCa(dir_, "other");
    server_ = MakeCert(ca_, dir_, "server", {"DNS:localhost", "IP:127.0.0.1"}, CertUse::kServer);
    client_ = MakeCert(ca_, dir_, "scheduler", {"DNS:kube-scheduler"}, CertUse::kClient);
    stranger_ = MakeCert(other_ca_, dir_, "stranger", {"DNS:stranger"}, CertUse::kClient);
  }
  void TearDown() override { fs::remove_all(dir_); }

  httpd::HttpServer Server() {
    httpd::PostHandlers post;
    post["/filter"] = [](const std::string& body) { return httpd::Response{200, "got " + body, "text/plain"}; };
    return httpd::HttpServer({}, post, 1024, "extender");
  }
  std::string Url(int port) { return "https://127.0.0.1:" + std::to_string(port) + "/filter"; }

  fs::path dir_;
  TestCa ca_, other_ca_;
  TestCert server_, client_, stranger_;
};

TEST_F(HttpsServerTest, MutualTlsServesOnlyClientsOfTheCa) {
  auto s = Server();
  ASSERT_TRUE(s.EnableTls({server_.cert, server_.key, ca_.cert}).ok());
  ASSERT_TRUE(s.Start("127.0.0.1:0").ok());

  Answer ok = Post(Url(s.port()), ca_.cert, &client_);
  ASSERT_EQ(ok.code, CURLE_OK) << curl_easy_strerror(ok.code);
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "got {\"x\":1}");

  Answer none = Post(Url(s.port()), ca_.cert, nullptr);
  EXPECT_NE(none.code, CURLE_OK);
  EXPECT_EQ(none.body, "");
  Answer stranger = Post(Url(s.port()), ca_.cert, &stranger_);
  EXPECT_NE(stranger.code, CURLE_OK);
  EXPECT_EQ(stranger.body, "");
  Answer plain = Post("http://127.0.0.1:" + std::to_string(s.port()) + "/filter", "", nullptr);
  EXPECT_NE(plain.code, CURLE_OK);
  EXPECT_EQ(plain.body, "");
  // None of that hurt the server.
  EXPECT_EQ(Post(Url(s.port()), ca_.cert, &client_).status, 200);
}

TEST_F(HttpsServerTest, WithoutAClientCaAnyClientIsServed) {
  auto s = Server();
  ASSERT_TRUE(s.EnableTls({server_.cert, server_.key, ""}).ok());
  ASSERT_TRUE(s.Start("127.0.0.1:0").ok());
  EXPECT_EQ(Post(Url(s.port()), ca_.cert, nullptr).status, 200);
  // The client still checks the server: a client trusting another CA refuses it.
  EXPECT_EQ(Post(Url(s.port()), other_ca_.cert, nullptr).code, CURLE_PEER_FAILED_VERIFICATION);
}

TEST_F(HttpsServerTest, UnreadableOrMismatchedFilesAreRefusedUpFront) {
  auto s = Server();
  Status st = s.EnableTls({(dir_ / "missing.crt").string(), server_.key, ""});
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("missing.crt"), std::string::npos) << st.message();
  st = s.EnableTls({server_.cert, client_.key, ""});  // another certificate's key
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.message();
  st = s.EnableTls({server_.cert, server_.key, (dir_ / "nope-ca.crt").string()});
  EXPECT_NE(st.message().find("client CA"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace nodevol::testing
