// SimpleClient, nodevold's client, against httpd's server over mutual TLS
// with certificates of a test CA: it verifies the server's name and chain,
// presents the client certificate re-read from its file, and classifies
// answers as Client does. Against the real apiserver: tests/k8s/enroll_test.sh.
#include "kube/simple_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "httpd/http_server.h"
#include "pki/ca.h"

namespace nodevol::kube {
namespace {

using namespace std::chrono_literals;

class SimpleClientTls : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/simple-client-" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
    ASSERT_TRUE(pki::Ca::Make("test apiserver CA", 24h, &ca_).ok());
    std::string key, cert;
    ASSERT_TRUE(ca_.Issue({"apiserver", {"kubernetes"}, {"127.0.0.1"}, true, false, 1h}, &key, &cert).ok());
    Write("server.key", key);
    Write("server.crt", cert);
    Write("ca.crt", ca_.cert_pem());
    ASSERT_TRUE(ca_.Issue({"system:node:n1", {}, {}, false, true, 1h}, &key, &cert).ok());
    Write("client.pem", cert + key);  // kubelet-client-current.pem holds both
    ASSERT_TRUE(server_.EnableTls({dir_ + "/server.crt", dir_ + "/server.key", dir_ + "/ca.crt"}).ok());
    ASSERT_TRUE(server_.Start("127.0.0.1:0").ok());
  }
  void Write(const std::string& name, const std::string& text) { std::ofstream(dir_ + "/" + name) << text; }
  Config Base() {
    Config c;
    c.server = "https://127.0.0.1:" + std::to_string(server_.port());
    c.ca_data = ca_.cert_pem();
    c.client_cert_file = dir_ + "/client.pem";
    c.client_key_file = dir_ + "/client.pem";
    return c;
  }
  std::unique_ptr<SimpleClient> Connect(Config c) {
    std::unique_ptr<SimpleClient> out;
    EXPECT_TRUE(SimpleClient::New(c, "test", 5s, &out).ok());
    return out;
  }

  std::string dir_;
  pki::Ca ca_;
  httpd::HttpServer server_{{{"/api/v1/nodes/n1",
                              [] {
                                return httpd::Response{200, R"({"kind":"Node","metadata":{"name":"n1"}})",
                                                       "application/json"};
                              }},
                             {"/api/v1/nodes/gone",
                              [] {
                                return httpd::Response{404, R"({"kind":"Status","code":404,"reason":"NotFound","message":"nodes \"gone\" not found"})",
                                                       "application/json"};
                              }}},
                            "test apiserver"};
};

TEST_F(SimpleClientTls, ReadsWithAClientCertificateAndClassifiesErrors) {
  auto c = Connect(Base());
  nlohmann::json node;
  Result r = c->Get("/api/v1/nodes/n1", &node);
  ASSERT_TRUE(r.ok()) << r.ToString();
  EXPECT_EQ(node["metadata"]["name"], "n1");
  r = c->Get("/api/v1/nodes/gone", &node);
  EXPECT_EQ(r.code(), Result::Code::kNotFound) << r.ToString();
  EXPECT_NE(r.message().find("not found"), std::string::npos);
}

TEST_F(SimpleClientTls, RefusesAServerItCannotVerify) {
  pki::Ca other;
  ASSERT_TRUE(pki::Ca::Make("another CA", 24h, &other).ok());
  Config wrong_ca = Base();
  wrong_ca.ca_data = other.cert_pem();
  nlohmann::json out;
  EXPECT_EQ(Connect(wrong_ca)->Get("/api/v1/nodes/n1", &out).code(), Result::Code::kNetworkError);

  Config wrong_name = Base();
  wrong_name.tls_server_name = "not-the-apiserver";
  EXPECT_EQ(Connect(wrong_name)->Get("/api/v1/nodes/n1", &out).code(), Result::Code::kNetworkError);

  Config by_name = Base();
  by_name.tls_server_name = "kubernetes";
  EXPECT_TRUE(Connect(by_name)->Get("/api/v1/nodes/n1", &out).ok());
}

TEST_F(SimpleClientTls, ReReadsTheClientCertificateEachCall) {
  auto c = Connect(Base());
  nlohmann::json out;
  ASSERT_TRUE(c->Get("/api/v1/nodes/n1", &out).ok());
  // A client certificate of a CA the server does not trust: refused, so the
  // file was read again.
  pki::Ca other;
  ASSERT_TRUE(pki::Ca::Make("another CA", 24h, &other).ok());
  std::string key, cert;
  ASSERT_TRUE(other.Issue({"system:node:n1", {}, {}, false, true, 1h}, &key, &cert).ok());
  Write("client.pem", cert + key);
  EXPECT_EQ(c->Get("/api/v1/nodes/n1", &out).code(), Result::Code::kNetworkError);
}

TEST(SimpleClient, NeedsAnHttpsUrl) {
  std::unique_ptr<SimpleClient> c;
  Config config;
  config.server = "http://127.0.0.1:1";
  EXPECT_EQ(SimpleClient::New(config, "test", 1s, &c).code(), Status::Code::kInvalidArgument);
  config.server = "https://";
  EXPECT_EQ(SimpleClient::New(config, "test", 1s, &c).code(), Status::Code::kInvalidArgument);
  config.server = "https://[fd00::1]:6443/prefix/";
  EXPECT_TRUE(SimpleClient::New(config, "test", 1s, &c).ok());
}

TEST(SimpleClient, GivesUpOnASilentServer) {
  // A listener that never accepts: the connect succeeds (the backlog), the
  // TLS handshake is never answered.
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  Config config;
  config.server = "https://127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  config.insecure_skip_tls_verify = true;
  std::unique_ptr<SimpleClient> c;
  ASSERT_TRUE(SimpleClient::New(config, "test", 500ms, &c).ok());
  auto start = std::chrono::steady_clock::now();
  nlohmann::json out;
  Result r = c->Get("/x", &out);
  EXPECT_EQ(r.code(), Result::Code::kNetworkError);
  EXPECT_NE(r.message().find("no answer within 500 ms"), std::string::npos) << r.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  ::close(fd);
}

}  // namespace
}  // namespace nodevol::kube
