// httpd::HttpServer's POST table (for the scheduler extender): bodies
// handed over whole, a bounded size refused with 413 before it is read,
// methods per path.
#include <gtest/gtest.h>

#include "httpd/http_server.h"
#include "httpd/raw_http_test_util.h"

namespace nodevol::httpd {
namespace {

using namespace nodevol::testing;

std::string Post(int port, const std::string& path, const std::string& body) {
  return RoundTrip(port, "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                             std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
}

class HttpPostTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.Start("127.0.0.1:0").ok()); }
  HttpServer server_{{{"/healthz", [] { return Response{200, "ok", kTextContentType}; }}},
                     {{"/filter",
                       [](const std::string& body) {
                         return Response{200, "got " + std::to_string(body.size()) + ": " + body.substr(0, 8),
                                         "application/json"};
                       }}},
                     64 * 1024,
                     "test"};
};

TEST_F(HttpPostTest, TheBodyReachesTheHandlerWhole) {
  std::string res = Post(server_.port(), "/filter", R"({"Pod":{}})");
  EXPECT_EQ(res.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << res;
  EXPECT_EQ(Body(res), R"(got 10: {"Pod":{)");  // the handler echoes 8 bytes
  std::string big(60 * 1024, 'x');
  EXPECT_EQ(Body(Post(server_.port(), "/filter", big)), "got 61440: xxxxxxxx");
}

TEST_F(HttpPostTest, AnOversizedBodyIs413AndNotRead) {
  std::string res = Post(server_.port(), "/filter", std::string(65 * 1024, 'x'));
  EXPECT_EQ(res.rfind("HTTP/1.1 413 ", 0), 0u) << res.substr(0, 200);
  EXPECT_NE(res.find("larger than 65536 bytes"), std::string::npos);
  // A length announced far beyond the limit, with no body sent: refused at
  // once, not waited for.
  auto t0 = std::chrono::steady_clock::now();
  res = RoundTrip(server_.port(), "POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000000\r\n\r\n");
  EXPECT_EQ(res.rfind("HTTP/1.1 413 ", 0), 0u) << res;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  // The server still serves.
  EXPECT_EQ(Body(Get(server_.port(), "GET", "/healthz")), "ok");
}

TEST_F(HttpPostTest, MethodsArePerPath) {
  std::string res = Get(server_.port(), "GET", "/filter");
  EXPECT_EQ(res.rfind("HTTP/1.1 405 ", 0), 0u) << res;
  EXPECT_NE(res.find("Allow: POST\r\n"), std::string::npos) << res;
  res = Post(server_.port(), "/healthz", "{}");
  EXPECT_EQ(res.rfind("HTTP/1.1 405 ", 0), 0u) << res;
  EXPECT_NE(res.find("Allow: GET, HEAD\r\n"), std::string::npos) << res;
  EXPECT_EQ(Post(server_.port(), "/nope", "{}").rfind("HTTP/1.1 404 ", 0), 0u);
}

// A request to a path that takes no body is answered from its header; a
// body it came with is never read (a GET-only server reads no body at all).
TEST(HttpGetOnly, ABodyIsNotReadWhereNoPathTakesOne) {
  HttpServer s({{"/healthz", [] { return Response{200, "ok", kTextContentType}; }}}, "test");
  ASSERT_TRUE(s.Start("127.0.0.1:0").ok());
  std::string res = RoundTrip(s.port(), "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000000\r\n\r\n");
  EXPECT_EQ(res.rfind("HTTP/1.1 405 ", 0), 0u) << res;
  EXPECT_NE(res.find("Connection: close\r\n"), std::string::npos) << res;
  EXPECT_EQ(Body(Get(s.port(), "GET", "/healthz")), "ok");
}

}  // namespace
}  // namespace nodevol::httpd
