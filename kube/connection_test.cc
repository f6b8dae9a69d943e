// The client's transport against a server that misbehaves on purpose: a
// raw socket server on loopback whose every connection runs the test's
// script, so that reuse, a server closing idle connections, no answer at
// all, slow streams and cancellation can be seen from both ends. The
// client over mutual TLS is kube/simple_client_test.cc and the client
// against the real apiserver tests/k8s/kube_client_test.sh.
#include "kube/client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace nodevol::kube {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Reads one request (headers and a Content-Length body); "" at EOF.
std::string ReadRequest(int fd) {
  std::string in;
  char buf[4096];
  size_t end;
  while ((end = in.find("\r\n\r\n")) == std::string::npos) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return "";
    in.append(buf, n);
  }
  size_t want = 0;
  if (size_t cl = in.find("Content-Length: "); cl != std::string::npos) want = std::stoul(in.substr(cl + 16));
  while (in.size() < end + 4 + want) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) return "";
    in.append(buf, n);
  }
  return in;
}

void Write(int fd, const std::string& s) {
  for (size_t off = 0; off < s.size();) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n <= 0) return;
    off += n;
  }
}

std::string Answer(const std::string& body, const std::string& extra = "") {
  return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n" + extra + "\r\n" + body;
}

// Accepts connections; each runs `script(fd, n)` on a thread of its own,
// n counting connections from 1.
class ScriptServer {
 public:
  explicit ScriptServer(std::function<void(int, int)> script) : script_(std::move(script)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    accept_ = std::thread([this] {
      for (;;) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        int n = ++connections;
        std::lock_guard<std::mutex> lock(mu_);
        threads_.emplace_back([this, c, n] {
          script_(c, n);
          ::close(c);
        });
      }
    });
  }
  ~ScriptServer() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    accept_.join();
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& t : threads_) t.join();
  }
  std::unique_ptr<Client> Connect(std::chrono::milliseconds timeout = 5000ms) {
    Config config;
    config.server = "http://127.0.0.1:" + std::to_string(port_);
    ClientOptions options;
    options.request_timeout = timeout;
    std::unique_ptr<Client> client;
    EXPECT_TRUE(Client::New(config, options, &client).ok());
    return client;
  }

  std::atomic<int> connections{0};

 private:
  std::function<void(int, int)> script_;
  int fd_ = -1;
  int port_ = 0;
  std::thread accept_;
  std::mutex mu_;
  std::vector<std::thread> threads_;
};

const std::string kPath = "/api/v1/namespaces/ns/configmaps/a";

TEST(KubeTransport, ConnectionsAreKeptAndReused) {
  std::atomic<int> requests{0};
  ScriptServer s([&](int fd, int) {
    while (!ReadRequest(fd).empty()) {
      ++requests;
      Write(fd, Answer(R"({"kind":"ConfigMap"})"));
    }
  });
  auto c = s.Connect();
  nlohmann::json out;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(c->Get(kPath, &out).ok());
  EXPECT_EQ(requests, 5);
  EXPECT_EQ(s.connections, 1) << "five calls in a row share one connection";

  // Calls at once each take a connection; all go back to the pool.
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i) ts.emplace_back([&] { EXPECT_TRUE(c->Get(kPath, nullptr).ok()); });
  for (auto& t : ts) t.join();
  int after_burst = s.connections;
  EXPECT_LE(after_burst, 4);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(c->Get(kPath, &out).ok());
  EXPECT_EQ(s.connections, after_burst) << "the burst's connections are reused";
}

TEST(KubeTransport, AConnectionTheServerClosedIsNotReused) {
  // Each connection answers one request and closes, without saying so.
  // POSTs, which are never sent twice: the pool must see the close.
  ScriptServer s([&](int fd, int) {
    if (ReadRequest(fd).empty()) return;
    Write(fd, Answer("{}"));
  });
  auto c = s.Connect();
  for (int i = 0; i < 3; ++i) {
    Result r = c->Create("/api/v1/namespaces/ns/configmaps", {{"metadata", {{"name", "b"}}}});
    EXPECT_TRUE(r.ok()) << i << ": " << r.ToString();
    std::this_thread::sleep_for(50ms);  // the server's close arrives
  }
  EXPECT_EQ(s.connections, 3);
}

TEST(KubeTransport, ARequestLostToAClosingConnectionIsSentAgainUnlessAPost) {
  // The server reads each connection's second request and closes without
  // answering: the race of a server closing an idle connection as the
  // client reuses it.
  std::atomic<int> posts{0};
  ScriptServer s([&](int fd, int) {
    for (int i = 0;; ++i) {
      std::string req = ReadRequest(fd);
      if (req.empty() || i == 1) return;
      if (req.rfind("POST", 0) == 0) ++posts;
      Write(fd, Answer("{}"));
    }
  });
  auto c = s.Connect();
  ASSERT_TRUE(c->Get(kPath, nullptr).ok());
  Result r = c->Get(kPath, nullptr);
  EXPECT_TRUE(r.ok()) << "a GET is sent again on a new connection: " << r.ToString();
  EXPECT_EQ(s.connections, 2);

  r = c->Create("/api/v1/namespaces/ns/configmaps", {{"metadata", {{"name", "b"}}}});
  EXPECT_EQ(r.code(), Result::Code::kNetworkError) << "a POST might have been carried out: " << r.ToString();
  EXPECT_EQ(posts, 0);
  EXPECT_EQ(s.connections, 2);
}

TEST(KubeTransport, NoAnswerEndsAtTheRequestTimeout) {
  std::atomic<bool> done{false};
  ScriptServer s([&](int fd, int) {
    ReadRequest(fd);
    while (!done) std::this_thread::sleep_for(10ms);
  });
  auto c = s.Connect(/*timeout=*/400ms);
  auto t0 = Clock::now();
  Result r = c->Get(kPath, nullptr);
  auto took = Clock::now() - t0;
  done = true;
  EXPECT_EQ(r.code(), Result::Code::kNetworkError) << r.ToString();
  EXPECT_NE(r.message().find("timed out"), std::string::npos) << r.ToString();
  EXPECT_GE(took, 390ms);
  EXPECT_LT(took, 3s);
}

TEST(KubeTransport, AStreamIsHandedOverAsItArrivesAndCancelledWithinASecond) {
  std::atomic<bool> first_seen{false}, done{false};
  ScriptServer s([&](int fd, int) {
    ReadRequest(fd);
    Write(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
    Write(fd, "6\r\nfirst\n\r\n");
    // The next piece only once the client has the first: no buffering
    // until the answer ends.
    while (!first_seen && !done) std::this_thread::sleep_for(5ms);
    Write(fd, "7\r\nsecond\n\r\n");
    while (!done) std::this_thread::sleep_for(10ms);
  });
  auto c = s.Connect();
  std::string got;
  std::atomic<bool> cancel{false};
  std::function<bool(std::string_view)> on_data = [&](std::string_view piece) {
    got.append(piece);
    if (got == "first\n") first_seen = true;
    if (got == "first\nsecond\n") {
      std::thread([&] {
        std::this_thread::sleep_for(100ms);
        cancel = true;
      }).detach();
    }
    return true;
  };
  auto t0 = Clock::now();
  Result r = c->Stream("/api/v1/configmaps?watch=1", 60s, on_data, &cancel);
  auto took = Clock::now() - t0;
  done = true;
  EXPECT_EQ(r.code(), Result::Code::kCancelled) << r.ToString();
  EXPECT_EQ(got, "first\nsecond\n");
  EXPECT_LT(took, 3s);
}

TEST(KubeTransport, AStreamTheCallerStopsClosesItsConnection) {
  ScriptServer s([&](int fd, int) {
    while (!ReadRequest(fd).empty()) {
      Write(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabc\n\r\n4\r\ndef\n\r\n0\r\n\r\n");
    }
  });
  auto c = s.Connect();
  std::function<bool(std::string_view)> stop = [](std::string_view) { return false; };
  EXPECT_EQ(c->Stream("/w", 10s, stop, nullptr).code(), Result::Code::kCancelled);
  std::string got;
  std::function<bool(std::string_view)> all = [&](std::string_view p) { return got.append(p), true; };
  Result r = c->Stream("/w", 10s, all, nullptr);
  EXPECT_TRUE(r.ok()) << r.ToString();
  EXPECT_EQ(got, "abc\ndef\n");
  EXPECT_EQ(s.connections, 2) << "the stopped stream's connection had unread bytes";
}

TEST(KubeTransport, AStreamedErrorKeepsABoundedExcerpt) {
  ScriptServer s([&](int fd, int) {
    ReadRequest(fd);
    std::string body = R"({"kind":"Status","code":410,"reason":"Expired","message":")" + std::string(200000, 'x') + "\"}";
    Write(fd, "HTTP/1.1 410 Gone\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  });
  auto c = s.Connect();
  bool called = false;
  std::function<bool(std::string_view)> on_data = [&](std::string_view) { return called = true; };
  Result r = c->Stream("/w", 10s, on_data, nullptr);
  EXPECT_FALSE(called) << "only a 2xx body is the stream's";
  EXPECT_FALSE(r.ok());
  EXPECT_LE(r.message().size(), 70000u);
}

TEST(KubeTransport, ALargeAnswerIsReadWhole) {
  // 12 MB: past Beast's default body limit (8 MB); a list of 50,000
  // objects served from the watch cache comes in one answer. The claim is
  // about size, not speed: a sanitizer build on a busy machine gets minutes.
  const size_t n = 12 * 1000 * 1000;
  ScriptServer s([&](int fd, int) {
    ReadRequest(fd);
    Write(fd, Answer("{\"kind\":\"List\",\"metadata\":{},\"pad\":\"" + std::string(n, 'p') + "\",\"items\":[{\"a\":1}]}"));
  });
  auto c = s.Connect(/*timeout=*/300s);
  nlohmann::json out;
  Result r = c->List("/api/v1/configmaps", {}, &out);
  ASSERT_TRUE(r.ok()) << r.ToString();
  EXPECT_EQ(out["items"].size(), 1u);
}

TEST(KubeTransport, AHostNameIsResolvedAndItsAddressesTried) {
  // "localhost" may resolve to ::1 first, where nothing listens: the
  // connect goes on to 127.0.0.1. (An IP literal is not resolved at all.)
  ScriptServer s([&](int fd, int) {
    while (!ReadRequest(fd).empty()) Write(fd, Answer("{}"));
  });
  std::string server = s.Connect()->config().server;
  Config config;
  config.server = "http://localhost:" + server.substr(server.rfind(':') + 1);
  std::unique_ptr<Client> c;
  ASSERT_TRUE(Client::New(config, {}, &c).ok());
  Result r = c->Get(kPath, nullptr);
  EXPECT_TRUE(r.ok()) << r.ToString();
}

TEST(KubeTransport, NothingListeningIsANetworkErrorNamingTheConnect) {
  int port;
  {
    ScriptServer s([](int, int) {});
    auto c = s.Connect();
    port = std::stoi(c->config().server.substr(c->config().server.rfind(':') + 1));
  }
  Config config;
  config.server = "http://127.0.0.1:" + std::to_string(port);
  std::unique_ptr<Client> c;
  ASSERT_TRUE(Client::New(config, {}, &c).ok());
  Result r = c->Get(kPath, nullptr);
  EXPECT_EQ(r.code(), Result::Code::kNetworkError);
  EXPECT_NE(r.message().find("connect to 127.0.0.1:" + std::to_string(port)), std::string::npos) << r.ToString();
}

}  // namespace
}  // namespace nodevol::kube
