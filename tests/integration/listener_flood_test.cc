// httpd's servers under a flood of strangers (issue 57, items 1 and 2): the
// scheduler extender (mutual TLS) and the probe port (plain HTTP) hold 64
// slots, and anyone on the pod network can open TCP connections to them.
// Sockets that never send a byte, and TLS handshakes that stop halfway,
// from one address and from several, must not keep an authenticated
// client (kube-scheduler) or a probe (kubelet) from being answered, and
// kube-scheduler's keep-alive connection must outlive a lull longer than
// the handshake deadline. Real TLS over loopback; libcurl as the client,
// as in https_server_test.cc.
#include <arpa/inet.h>
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "httpd/http_server.h"
#include "test_certs.h"

namespace nodevol::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

size_t Collect(char* p, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(p, size * n);
  return size * n;
}

// A connection from `from` (a 127.x.y.z address: each is a peer of its
// own) to 127.0.0.1:port that sends `bytes` and then nothing; -1 on error.
int Stranger(int port, const std::string& from, const std::string& bytes = "") {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in src{};
  src.sin_family = AF_INET;
  ::inet_pton(AF_INET, from.c_str(), &src.sin_addr);
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(static_cast<uint16_t>(port));
  dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof dst) != 0) {
    ::close(fd);
    return -1;
  }
  if (!bytes.empty() && ::write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// The first bytes of a TLS ClientHello record, and no more: a handshake
// that stops halfway.
const std::string kHalfHello("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11);

class Client {
 public:
  Client() : c_(curl_easy_init()) {}
  ~Client() { curl_easy_cleanup(c_); }
  // A POST (over the kept connection when there is one); the status, 0 on
  // failure. *reused: no new connection was made for it.
  long Post(const std::string& url, const std::string& ca, const TestCert* cert, bool* reused = nullptr) {
    body_.clear();
    curl_easy_setopt(c_, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c_, CURLOPT_POSTFIELDS, "{}");
    curl_easy_setopt(c_, CURLOPT_TIMEOUT, 10L);
    if (!ca.empty()) curl_easy_setopt(c_, CURLOPT_CAINFO, ca.c_str());
    if (cert) {
      curl_easy_setopt(c_, CURLOPT_SSLCERT, cert->cert.c_str());
      curl_easy_setopt(c_, CURLOPT_SSLKEY, cert->key.c_str());
    }
    curl_easy_setopt(c_, CURLOPT_WRITEFUNCTION, Collect);
    curl_easy_setopt(c_, CURLOPT_WRITEDATA, &body_);
    if (curl_easy_perform(c_) != CURLE_OK) return 0;
    long status = 0, connects = 0;
    curl_easy_getinfo(c_, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_getinfo(c_, CURLINFO_NUM_CONNECTS, &connects);
    if (reused) *reused = connects == 0;
    return status;
  }
  long Get(const std::string& url) {
    body_.clear();
    curl_easy_setopt(c_, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c_, CURLOPT_TIMEOUT, 5L);
    curl_easy_setopt(c_, CURLOPT_FORBID_REUSE, 1L);  // kubelet's prober: a connection a probe
    curl_easy_setopt(c_, CURLOPT_WRITEFUNCTION, Collect);
    curl_easy_setopt(c_, CURLOPT_WRITEDATA, &body_);
    if (curl_easy_perform(c_) != CURLE_OK) return 0;
    long status = 0;
    curl_easy_getinfo(c_, CURLINFO_RESPONSE_CODE, &status);
    return status;
  }

 private:
  CURL* c_;
  std::string body_;
};

class ListenerFloodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("flood-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    ca_ = MakeCa(dir_, "ext");
    server_ = MakeCert(ca_, dir_, "server", {"DNS:localhost", "IP:127.0.0.1"}, CertUse::kServer);
    client_ = MakeCert(ca_, dir_, "scheduler", {"DNS:kube-scheduler"}, CertUse::kClient);
  }
  void TearDown() override {
    for (int fd : flood_) ::close(fd);
    fs::remove_all(dir_);
  }

  static httpd::PostHandlers Filter() {
    httpd::PostHandlers post;
    post["/filter"] = [](const std::string&) { return httpd::Response{200, "ok", "text/plain"}; };
    return post;
  }
  static httpd::Handlers Probes() {
    return {{"/healthz", [] { return httpd::Response{200, "ok\n"}; }}};
  }
  std::string Url(int port, const std::string& scheme = "https", const std::string& path = "/filter") {
    return scheme + "://127.0.0.1:" + std::to_string(port) + path;
  }
  // n strangers from each of `peers` addresses 127.0.0.10, .11, ...
  void Flood(int port, int peers, int n, const std::string& bytes = "") {
    for (int p = 0; p < peers; ++p)
      for (int i = 0; i < n; ++i) {
        int fd = Stranger(port, "127.0.0." + std::to_string(10 + p), bytes);
        ASSERT_GE(fd, 0) << strerror(errno);
        flood_.push_back(fd);
      }
  }
  // Waits until the server has accepted what the flood sent (and so has
  // had to decide about each connection).
  void AwaitDecided(const httpd::HttpServer& s, uint64_t at_least) {
    auto until = Clock::now() + 10s;
    while (s.evicted() + s.refused() + s.expired() < at_least && Clock::now() < until)
      std::this_thread::sleep_for(10ms);
  }

  fs::path dir_;
  TestCa ca_;
  TestCert server_, client_;
  std::vector<int> flood_;
};

TEST_F(ListenerFloodTest, StrangersDoNotShutOutAnAuthenticatedClient) {
  httpd::HttpServer s({}, Filter(), 1024, "extender");
  ASSERT_TRUE(s.EnableTls({server_.cert, server_.key, ca_.cert}).ok());
  ASSERT_TRUE(s.Start("127.0.0.1:0").ok());
  // 4 addresses x 40 silent sockets, then 4 x 40 halfway handshakes: five
  // times the 64 slots, and more than any one address's 32.
  Flood(s.port(), 4, 40);
  Flood(s.port(), 4, 40, kHalfHello);
  AwaitDecided(s, 320 - 64);
  EXPECT_EQ(s.connections(), 64u) << "full of strangers";
  // While they hold every slot, kube-scheduler's calls are answered.
  int ok = 0;
  auto t0 = Clock::now();
  for (int i = 0; i < 20; ++i) {
    Client c;
    ok += c.Post(Url(s.port()), ca_.cert, &client_) == 200;
  }
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
  EXPECT_EQ(ok, 20) << "answered during the flood";
  std::cout << "20 calls during the flood of 320 strangers: " << took.count() << " ms\n";
  EXPECT_EQ(s.refused(), 0u) << "a stranger only ever took a stranger's place";
  // And the strangers go at the handshake deadline (3 s).
  auto until = Clock::now() + 10s;
  while (s.connections() > 0 && Clock::now() < until) std::this_thread::sleep_for(50ms);
  EXPECT_EQ(s.connections(), 0u);
}

TEST_F(ListenerFloodTest, AKeptAliveClientOutlivesALullAndIsNotEvicted) {
  httpd::HttpServer s({}, Filter(), 1024, "extender");
  httpd::Limits l;
  l.admission.max_connections = 4;
  l.admission.max_per_peer = 4;  // the clients all come from 127.0.0.1
  l.admission.idle_timeout = 120s;
  ASSERT_TRUE(s.SetLimits(l).ok());
  ASSERT_TRUE(s.EnableTls({server_.cert, server_.key, ca_.cert}).ok());
  ASSERT_TRUE(s.Start("127.0.0.1:0").ok());
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 4; ++i) {
    clients.push_back(std::make_unique<Client>());
    ASSERT_EQ(clients.back()->Post(Url(s.port()), ca_.cert, &client_), 200);
  }
  // Every slot now belongs to an authenticated, idle client: strangers are
  // refused at accept, and the clients keep their connections.
  Flood(s.port(), 2, 20);
  AwaitDecided(s, 40);
  EXPECT_EQ(s.refused(), 40u);
  EXPECT_EQ(s.evicted(), 0u);
  // A lull longer than the handshake deadline and the old 10 s limit.
  std::this_thread::sleep_for(11s);
  for (auto& c : clients) {
    bool reused = false;
    EXPECT_EQ(c->Post(Url(s.port()), ca_.cert, &client_, &reused), 200);
    EXPECT_TRUE(reused) << "the kept-alive connection was closed";
  }
}

TEST_F(ListenerFloodTest, ProbesAreAnsweredDuringAFloodOfThePlainPort) {
  httpd::HttpServer s(Probes(), "probes");
  ASSERT_TRUE(s.Start("127.0.0.1:0").ok());
  Flood(s.port(), 4, 40);
  // Strangers that sent one request and stay, idle (anyone can do that on a
  // plain port: they give way too).
  Flood(s.port(), 2, 20, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  AwaitDecided(s, 200 - 64);
  int ok = 0;
  for (int i = 0; i < 3; ++i) {
    Client c;
    ok += c.Get(Url(s.port(), "http", "/healthz")) == 200;
  }
  EXPECT_EQ(ok, 3) << "kubelet's probes failed during the flood";
}

TEST_F(ListenerFloodTest, ASlowHandlerDelaysAnswersNotAcceptsOrHandshakes) {
  std::atomic<bool> release{false};
  httpd::PostHandlers post;
  post["/filter"] = [&](const std::string&) {
    while (!release) std::this_thread::sleep_for(10ms);
    return httpd::Response{200, "ok", "text/plain"};
  };
  httpd::HttpServer s(Probes(), post, 1024, "extender");
  ASSERT_TRUE(s.Start("127.0.0.1:0").ok());
  std::thread stuck([&] { Client().Post(Url(s.port(), "http"), "", nullptr); });
  // The handler thread is taken; the I/O thread still evicts strangers and
  // reads headers: a full flood is still decided about.
  std::this_thread::sleep_for(200ms);
  Flood(s.port(), 3, 40);
  AwaitDecided(s, 120 - 64);
  EXPECT_GE(s.evicted(), 120u - 64u);
  release = true;
  stuck.join();
  Client c;
  EXPECT_EQ(c.Get(Url(s.port(), "http", "/healthz")), 200);
}

}  // namespace
}  // namespace nodevol::testing
