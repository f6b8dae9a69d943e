#include "metrics/status_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>

#include "httpd/raw_http_test_util.h"

namespace nodevol::provisioner {
namespace {

using namespace nodevol::testing;

// One request with Connection: close (a POST carries "{}"); all the server sent.
std::string Request(int port, const std::string& method, const std::string& path) {
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n";
  req += method == "POST" ? "Content-Length: 2\r\n\r\n{}" : "\r\n";
  return RoundTrip(port, req);
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

class StatusServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    metrics_.ProvisionSucceeded("fast", "", 0.5);
    StatusServer::Options o;
    o.metrics = &metrics_;
    o.refresh = [this] {
      ++refreshes_;
      metrics_.SetQueueDepth("claim", 7);
    };
    o.ready = [this](std::string* reason) {
      std::lock_guard lock(mu_);
      if (!ready_) *reason = reason_;
      return ready_;
    };
    server_ = std::make_unique<StatusServer>(std::move(o));
    ASSERT_TRUE(server_->Start("127.0.0.1:0").ok());
    port_ = server_->port();
    ASSERT_GT(port_, 0);
  }
  void SetReady(bool ready, std::string reason = "") {
    std::lock_guard lock(mu_);
    ready_ = ready;
    reason_ = std::move(reason);
  }

  ProvisionerMetrics metrics_;
  std::atomic<int> refreshes_{0};
  std::mutex mu_;
  bool ready_ = false;
  std::string reason_ = "caches not synced";
  std::unique_ptr<StatusServer> server_;
  int port_ = 0;
};

TEST_F(StatusServerTest, MetricsServesTheExpositionAfterRefresh) {
  std::string res = Request(port_, "GET", "/metrics");
  EXPECT_TRUE(StartsWith(res, "HTTP/1.1 200 OK\r\n")) << res;
  EXPECT_NE(res.find("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), std::string::npos) << res;
  std::string body = Body(res);
  EXPECT_NE(body.find("\ncontroller_persistentvolumeclaim_provision_total{class=\"fast\",source=\"\"} 1\n"),
            std::string::npos)
      << body;
  // The refresh ran before this scrape rendered.
  EXPECT_NE(body.find("\nnodevol_provisioner_queue_depth{queue=\"claim\"} 7\n"), std::string::npos) << body;
  EXPECT_EQ(refreshes_, 1);
  EXPECT_EQ(body, metrics_.Render());
}

TEST_F(StatusServerTest, HealthzIsOkEvenWhenNotReady) {
  std::string res = Request(port_, "GET", "/healthz");
  EXPECT_TRUE(StartsWith(res, "HTTP/1.1 200 OK\r\n")) << res;
  EXPECT_EQ(Body(res), "ok");
}

TEST_F(StatusServerTest, ReadyzFollowsTheCallback) {
  std::string res = Request(port_, "GET", "/readyz");
  EXPECT_TRUE(StartsWith(res, "HTTP/1.1 503 ")) << res;
  EXPECT_EQ(Body(res), "not ready: caches not synced\n");

  SetReady(true);
  res = Request(port_, "GET", "/readyz");
  EXPECT_TRUE(StartsWith(res, "HTTP/1.1 200 OK\r\n")) << res;
  EXPECT_EQ(Body(res), "ok");

  SetReady(false, "stopping");
  res = Request(port_, "GET", "/readyz?verbose");  // probes may add parameters
  EXPECT_TRUE(StartsWith(res, "HTTP/1.1 503 ")) << res;
  EXPECT_EQ(Body(res), "not ready: stopping\n");
}

TEST_F(StatusServerTest, HeadHasLengthButNoBody) {
  std::string res = Request(port_, "HEAD", "/readyz");
  EXPECT_TRUE(StartsWith(res, "HTTP/1.1 503 ")) << res;
  EXPECT_NE(res.find("Content-Length: " + std::to_string(std::string("not ready: caches not synced\n").size()) +
                     "\r\n"),
            std::string::npos)
      << res;
  EXPECT_EQ(Body(res), "");
}

TEST_F(StatusServerTest, PostIs405AndUnknownPathIs404) {
  for (const char* path : {"/metrics", "/healthz", "/readyz"}) {
    std::string res = Request(port_, "POST", path);
    EXPECT_TRUE(StartsWith(res, "HTTP/1.1 405 ")) << path << ": " << res;
    EXPECT_NE(res.find("Allow: GET, HEAD\r\n"), std::string::npos) << res;
  }
  EXPECT_EQ(refreshes_, 0) << "a refused request must not run handlers";
  for (const char* path : {"/", "/nope", "/metrics/", "/readyz/x", "/healthz%00"}) {
    std::string res = Request(port_, "GET", path);
    EXPECT_TRUE(StartsWith(res, "HTTP/1.1 404 ")) << path << ": " << res;
  }
}

TEST(StatusServerNoCallback, ReadyWithoutACallback) {
  ProvisionerMetrics m;
  StatusServer s({&m, nullptr, nullptr});
  ASSERT_TRUE(s.Start("127.0.0.1:0").ok());
  std::string res = Request(s.port(), "GET", "/readyz");
  EXPECT_TRUE(StartsWith(res, "HTTP/1.1 200 OK\r\n")) << res;
  EXPECT_TRUE(StartsWith(Request(s.port(), "GET", "/metrics"), "HTTP/1.1 200 OK\r\n"));
}

TEST(StatusServerNoCallback, AThrowingRefreshIs500AndTheServerStays) {
  ProvisionerMetrics m;
  StatusServer s({&m, [] { throw std::runtime_error("boom"); }, nullptr});
  ASSERT_TRUE(s.Start("127.0.0.1:0").ok());
  EXPECT_TRUE(StartsWith(Request(s.port(), "GET", "/metrics"), "HTTP/1.1 500 "));
  EXPECT_EQ(Body(Request(s.port(), "GET", "/healthz")), "ok");
}

TEST(StatusServerNoCallback, BadAddressNamesIt) {
  ProvisionerMetrics m;
  StatusServer s({&m, nullptr, nullptr});
  Status st = s.Start("localhost:8080");
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("\"localhost:8080\""), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace nodevol::provisioner
