#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "metrics/http_server.h"
#include "httpd/raw_http_test_util.h"
#include "metrics/metrics.h"

namespace nodevol::metrics {
namespace {
using namespace nodevol::testing;

bool HasLine(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

// Value of the sample whose line starts with `series ` (exact series match).
std::string Sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) return line.substr(series.size() + 1);
  }
  return "<missing " + series + ">";
}

TEST(MetricsRender, EmptyRegistryDeclaresEveryFamily) {
  Registry r;
  std::string out = r.Render();
  for (const char* f : {"nodevol_rpc_total counter", "nodevol_rpc_errors_total counter",
                        "nodevol_rpc_duration_seconds histogram", "nodevol_pool_total_bytes gauge",
                        "nodevol_pool_free_bytes gauge", "nodevol_pool_allocated_bytes gauge",
                        "nodevol_pool_volumes gauge", "nodevol_drift_findings gauge"}) {
    EXPECT_TRUE(HasLine(out, std::string("# TYPE ") + f)) << f << "\n" << out;
  }
  EXPECT_TRUE(HasLine(out, "nodevol_drift_findings 0")) << out;
  EXPECT_TRUE(HasLine(out, "nodevol_state_write_oldest_seconds 0")) << out;
  EXPECT_EQ(out.back(), '\n');
}

TEST(MetricsRender, StateWriteOldestIsReplacedNotAdded) {
  Registry r;
  r.SetStateWriteOldest(12.5);
  EXPECT_EQ(Sample(r.Render(), "nodevol_state_write_oldest_seconds"), "12.5");
  r.SetStateWriteOldest(0);  // the write finished
  EXPECT_EQ(Sample(r.Render(), "nodevol_state_write_oldest_seconds"), "0");
  r.SetStateWriteOldest(-1);  // a caller's bug: never a negative age
  EXPECT_EQ(Sample(r.Render(), "nodevol_state_write_oldest_seconds"), "0");
}

TEST(MetricsRender, CountersByMethodAndCode) {
  Registry r;
  r.ObserveRpc("Publish", "OK", 0.01);
  r.ObserveRpc("Publish", "OK", 0.02);
  r.ObserveRpc("Publish", "INVALID_ARGUMENT", 0.001);
  r.ObserveRpc("Unpublish", "OK", 0.5);
  std::string out = r.Render();
  EXPECT_TRUE(HasLine(out, R"(nodevol_rpc_total{method="Publish",code="OK"} 2)")) << out;
  EXPECT_TRUE(HasLine(out, R"(nodevol_rpc_total{method="Publish",code="INVALID_ARGUMENT"} 1)"));
  EXPECT_TRUE(HasLine(out, R"(nodevol_rpc_total{method="Unpublish",code="OK"} 1)"));
  EXPECT_TRUE(HasLine(out, R"(nodevol_rpc_errors_total{method="Publish"} 1)"));
  EXPECT_TRUE(HasLine(out, R"(nodevol_rpc_errors_total{method="Unpublish"} 0)"));
}

TEST(MetricsRender, HistogramBucketsAreCumulative) {
  Registry r;
  r.ObserveRpc("Stage", "OK", 0.0003);  // first bucket
  r.ObserveRpc("Stage", "OK", 0.001);   // exactly on a bound: le is inclusive
  r.ObserveRpc("Stage", "OK", 0.7);
  r.ObserveRpc("Stage", "OK", 20);      // beyond 10 s: only +Inf
  std::string out = r.Render();
  auto bucket = [&](const std::string& le) {
    return Sample(out, R"(nodevol_rpc_duration_seconds_bucket{method="Stage",le=")" + le + "\"}");
  };
  EXPECT_EQ(bucket("0.0005"), "1") << out;
  EXPECT_EQ(bucket("0.001"), "2");
  EXPECT_EQ(bucket("0.0025"), "2");
  EXPECT_EQ(bucket("0.5"), "2");
  EXPECT_EQ(bucket("1"), "3");
  EXPECT_EQ(bucket("10"), "3");
  EXPECT_EQ(bucket("+Inf"), "4");
  EXPECT_EQ(Sample(out, R"(nodevol_rpc_duration_seconds_count{method="Stage"})"), "4");
  EXPECT_NEAR(std::stod(Sample(out, R"(nodevol_rpc_duration_seconds_sum{method="Stage"})")),
              20.7013, 1e-9);
  // All 14 bounds plus +Inf, in increasing order.
  const char* les[] = {"0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1",
                       "0.25",   "0.5",   "1",      "2.5",   "5",    "10",    "+Inf"};
  size_t pos = 0;
  for (const char* le : les) {
    size_t at = out.find(std::string("le=\"") + le + "\"", pos);
    ASSERT_NE(at, std::string::npos) << le;
    pos = at;
  }
}

TEST(MetricsRender, NegativeDurationCountsAsZero) {
  Registry r;
  r.ObserveRpc("Stage", "OK", -1);
  std::string out = r.Render();
  EXPECT_EQ(Sample(out, R"(nodevol_rpc_duration_seconds_sum{method="Stage"})"), "0");
  EXPECT_EQ(Sample(out, R"(nodevol_rpc_duration_seconds_bucket{method="Stage",le="0.0005"})"), "1");
}

TEST(MetricsRender, LabelValuesAreEscaped) {
  Registry r;
  r.ObserveRpc("a\"b\\c\nd", "OK", 0.1);
  r.SetPool("p\"1", "back\\end", 1, 1, 0, 0);
  std::string out = r.Render();
  EXPECT_TRUE(HasLine(out, R"(nodevol_rpc_total{method="a\"b\\c\nd",code="OK"} 1)")) << out;
  EXPECT_TRUE(HasLine(out, R"(nodevol_pool_total_bytes{pool="p\"1",backend="back\\end"} 1)"));
}

TEST(MetricsRender, PoolAndDriftGauges) {
  Registry r;
  r.SetPool("fast", "lvm", 100, 40, 60, 3);
  r.SetPool("fast", "lvm", 100, 30, 70, 4, 2);  // replaces, does not add
  r.SetPool("bulk", "dir", 1000, 999, 1, 1);
  r.SetDrift(7);
  std::string out = r.Render();
  EXPECT_TRUE(HasLine(out, R"(nodevol_pool_total_bytes{pool="fast",backend="lvm"} 100)")) << out;
  EXPECT_TRUE(HasLine(out, R"(nodevol_pool_free_bytes{pool="fast",backend="lvm"} 30)"));
  EXPECT_TRUE(HasLine(out, R"(nodevol_pool_allocated_bytes{pool="fast",backend="lvm"} 70)"));
  EXPECT_TRUE(HasLine(out, R"(nodevol_pool_volumes{pool="fast",backend="lvm"} 4)"));
  EXPECT_TRUE(HasLine(out, R"(nodevol_pool_snapshots{pool="fast",backend="lvm"} 2)"));
  EXPECT_TRUE(HasLine(out, R"(nodevol_pool_snapshots{pool="bulk",backend="dir"} 0)"));
  EXPECT_TRUE(HasLine(out, R"(nodevol_pool_free_bytes{pool="bulk",backend="dir"} 999)"));
  EXPECT_FALSE(HasLine(out, R"(nodevol_pool_free_bytes{pool="fast",backend="lvm"} 40)"));
  EXPECT_TRUE(HasLine(out, "nodevol_drift_findings 7"));
}

TEST(MetricsRender, ThinUsageOnlyForThinPools) {
  Registry r;
  r.SetPool("thin", "lvm", 100, 40, 60, 3);
  r.SetThinUsage("thin", 12.5, 3.25);
  r.SetPool("thick", "lvm", 100, 40, 60, 3);
  std::string out = r.Render();
  EXPECT_TRUE(HasLine(out, "# TYPE nodevol_pool_thin_data_percent gauge")) << out;
  EXPECT_EQ(Sample(out, R"(nodevol_pool_thin_data_percent{pool="thin",backend="lvm"})"), "12.5");
  EXPECT_EQ(Sample(out, R"(nodevol_pool_thin_metadata_percent{pool="thin",backend="lvm"})"), "3.25");
  EXPECT_EQ(out.find(R"(nodevol_pool_thin_data_percent{pool="thick")"), std::string::npos) << out;
}

// Every sample belongs to a family whose # HELP and # TYPE came first, and
// each family is declared once.
TEST(MetricsRender, EverySampleFollowsItsTypeLine) {
  Registry r;
  r.ObserveRpc("Publish", "OK", 0.01);
  r.SetPool("fast", "lvm", 1, 1, 0, 0);
  std::istringstream in(r.Render());
  std::set<std::string> helped, typed;
  std::string current;
  for (std::string line; std::getline(in, line);) {
    ASSERT_FALSE(line.empty());
    if (line.rfind("# HELP ", 0) == 0) {
      std::string name = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(helped.insert(name).second) << "HELP twice: " << name;
    } else if (line.rfind("# TYPE ", 0) == 0) {
      current = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(helped.count(current)) << "TYPE before HELP: " << current;
      EXPECT_TRUE(typed.insert(current).second) << "TYPE twice: " << current;
    } else {
      std::string name = line.substr(0, line.find_first_of("{ "));
      EXPECT_EQ(name.rfind(current, 0), 0u) << line << " outside family " << current;
    }
  }
}

// --- HTTP ---

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.ObserveRpc("Publish", "OK", 0.01);
    ASSERT_TRUE(server_.Start("127.0.0.1:0").ok());
    port_ = server_.port();
    ASSERT_GT(port_, 0);
  }
  Registry registry_;
  HttpServer server_{&registry_};
  int port_ = 0;
};

TEST_F(HttpServerTest, ServesMetrics) {
  std::string res = Get(port_, "GET", "/metrics");
  EXPECT_EQ(res.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << res;
  EXPECT_NE(res.find("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"),
            std::string::npos) << res;
  EXPECT_EQ(Body(res), registry_.Render());
  EXPECT_TRUE(HasLine(Body(res), R"(nodevol_rpc_total{method="Publish",code="OK"} 1)"));
}

TEST_F(HttpServerTest, ServesHealthz) {
  std::string res = Get(port_, "GET", "/healthz");
  EXPECT_EQ(res.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << res;
  EXPECT_EQ(Body(res), "ok");
}

TEST_F(HttpServerTest, HeadHasLengthButNoBody) {
  std::string res = Get(port_, "HEAD", "/metrics");
  EXPECT_EQ(res.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << res;
  EXPECT_NE(res.find("Content-Length: " + std::to_string(registry_.Render().size()) + "\r\n"),
            std::string::npos) << res;
  EXPECT_EQ(Body(res), "");
}

TEST_F(HttpServerTest, UnknownPathIs404AndOtherMethods405) {
  EXPECT_EQ(Get(port_, "GET", "/nope").rfind("HTTP/1.1 404 ", 0), 0u);
  std::string res = Get(port_, "POST", "/metrics");
  EXPECT_EQ(res.rfind("HTTP/1.1 405 ", 0), 0u) << res;
  EXPECT_NE(res.find("Allow: GET, HEAD\r\n"), std::string::npos) << res;
}

// A 1.0 client is answered in 1.0 (the http_request fuzz target's
// property allows it); a version other than 1.0 and 1.1 is refused by
// Beast's parser and the connection closed without an answer.
TEST_F(HttpServerTest, AnswersOnlyHttp1InTheClientsVersion) {
  std::string res = RoundTrip(port_, "GET /healthz HTTP/1.0\r\n\r\n");
  EXPECT_EQ(res.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << res;
  EXPECT_EQ(RoundTrip(port_, "GET /healthz HTTP/1.9\r\nHost: x\r\n\r\n"), "");
  EXPECT_EQ(RoundTrip(port_, "GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n"), "");
}

TEST_F(HttpServerTest, KeepAliveServesSeveralRequests) {
  std::string res = RoundTrip(port_,
                              "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                              "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(res.find("HTTP/1.1 200 OK"), 0u) << res;
  EXPECT_NE(res.find("HTTP/1.1 200 OK", 1), std::string::npos) << res;
}

TEST_F(HttpServerTest, StopIsPromptWithIdleClientsAndIdempotent) {
  int idle = Connect(port_);
  ASSERT_GE(idle, 0);
  int partial = Connect(port_);
  ASSERT_GE(partial, 0);
  send(partial, "GET /met", 8, MSG_NOSIGNAL);
  // Make sure the server has accepted both before stopping.
  EXPECT_EQ(Body(Get(port_, "GET", "/healthz")), "ok");

  auto start = std::chrono::steady_clock::now();
  auto stopped = std::async(std::launch::async, [&] { server_.Stop(); });
  bool prompt = stopped.wait_for(std::chrono::seconds(3)) == std::future_status::ready;
  // Closing the clients unblocks a server that waits on them, so a failing
  // run ends with a failure rather than a hang.
  close(idle);
  close(partial);
  stopped.wait();
  EXPECT_TRUE(prompt) << "Stop() blocked on idle clients";
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  server_.Stop();  // idempotent
  EXPECT_LT(Connect(port_), 0) << "still accepting after Stop()";
}

TEST_F(HttpServerTest, RestartsAfterStop) {
  server_.Stop();
  ASSERT_TRUE(server_.Start("127.0.0.1:0").ok());
  EXPECT_EQ(Body(Get(server_.port(), "GET", "/healthz")), "ok");
}

TEST(HttpServerStart, BusyPortIsUnavailable) {
  Registry r;
  HttpServer a(&r), b(&r);
  ASSERT_TRUE(a.Start("127.0.0.1:0").ok());
  std::string addr = "127.0.0.1:" + std::to_string(a.port());
  Status st = b.Start(addr);
  EXPECT_EQ(st.code(), Status::Code::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find(addr), std::string::npos) << st.ToString();
}

TEST(HttpServerStart, MalformedAddressIsInvalidArgument) {
  Registry r;
  for (const char* addr : {"", "nonsense", "127.0.0.1", "127.0.0.1:", "127.0.0.1:http",
                           "127.0.0.1:65536", "127.0.0.1:-1", "::1:80", "[::1:80", "[127.0.0.1]:80",
                           "localhost:9100", "300.0.0.1:80"}) {
    HttpServer s(&r);
    Status st = s.Start(addr);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << addr << ": " << st.ToString();
    EXPECT_NE(st.message().find(std::string("\"") + addr + "\""), std::string::npos)
        << st.ToString();
  }
}

TEST(HttpServerStart, Ipv6Loopback) {
  Registry r;
  HttpServer s(&r);
  Status st = s.Start("[::1]:0");
  if (st.code() == Status::Code::kUnavailable) GTEST_SKIP() << "no IPv6 here: " << st.ToString();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_GT(s.port(), 0);
}

}  // namespace
}  // namespace nodevol::metrics
