// httpd (httpd/http_server.h) as a client on the network drives it: the
// input is the bytes of one connection (request lines, headers, bodies,
// several pipelined requests), written to a real HttpServer on loopback,
// then the write side closed. Properties beyond not crashing: the server
// answers or closes within the deadline (never waits on a client that
// has said all it will); what it sends starts with an HTTP/1.1 (or 1.0)
// status line; no handler gets a POST body over the limit; the server
// keeps serving a plain GET afterwards.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "httpd/http_server.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using nodevol::httpd::HttpServer;
using nodevol::httpd::Response;

constexpr size_t kMaxBody = 256;
std::atomic<size_t> g_largest_body{0};

HttpServer* Server() {
  static HttpServer* server = [] {
    nodevol::httpd::Handlers get{{"/metrics", [] { return Response{200, "up 1\n"}; }},
                                 {"/healthz", [] { return Response{200, "ok\n"}; }},
                                 {"/boom", []() -> Response { throw std::runtime_error("handler failed"); }}};
    nodevol::httpd::PostHandlers post{{"/filter", [](const std::string& body) {
                                         size_t seen = g_largest_body.load();
                                         while (body.size() > seen && !g_largest_body.compare_exchange_weak(seen, body.size())) {
                                         }
                                         return Response{200, std::to_string(body.size())};
                                       }}};
    auto* s = new HttpServer(std::move(get), std::move(post), kMaxBody, "fuzz", 8);
    nodevol::Status st = s->Start("127.0.0.1:0");
    if (!st.ok()) nodevol::fuzz::Broken("server did not start: " + st.message());
    return s;
  }();
  return server;
}

// A few hundred connections a second, each closed by the server first,
// leave its side of each in TIME_WAIT: with other tests on the machine
// doing the same, connect(2) can find no free local port for a moment
// (EADDRNOTAVAIL; a CI run once failed so). Such a failure is retried for
// up to 2 s; any other, or one that lasts, breaks the property: the
// server must keep accepting.
int Connect(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (;;) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) nodevol::fuzz::Broken("socket failed");
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
    int e = errno;
    ::close(fd);
    bool transient = e == EADDRNOTAVAIL || e == EAGAIN || e == EINTR;
    if (!transient || std::chrono::steady_clock::now() > until)
      nodevol::fuzz::Broken(std::string("connect failed: ") + std::strerror(e));
    ::usleep(10000);
  }
}

// How long the server may take, in wall time: 5 s, or
// NODEVOL_FUZZ_WALL_SECONDS, which tests/fuzz/run-long sets to its
// FUZZ_TIMEOUT (found by a long run at nice 19 beside a CI run: starved,
// an input that takes 25 ms alone "hung" past 5 s).
int WallSeconds() {
  static const int s = [] {
    const char* e = std::getenv("NODEVOL_FUZZ_WALL_SECONDS");
    int v = e ? std::atoi(e) : 0;
    return v > 0 ? v : 5;
  }();
  return s;
}

// Sends `in`, closes the write side, reads until the server closes. The
// server's own idle deadline is 10 s; a client that has closed its side
// must be answered or dropped well within it.
std::string Exchange(int port, const uint8_t* in, size_t size) {
  int fd = Connect(port);
  for (size_t done = 0; done < size;) {
    ssize_t n = ::send(fd, in + done, size - done, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server closed first (an answer to a bad header): fine
    done += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(WallSeconds());
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) nodevol::fuzz::Broken("the server neither answered nor closed within the wall time of the client's EOF");
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static size_t runs = 0;
  HttpServer* server = Server();
  std::string out = Exchange(server->port(), data, size);
  if (!out.empty()) {
    FUZZ_CHECK(out.rfind("HTTP/1.1 ", 0) == 0 || out.rfind("HTTP/1.0 ", 0) == 0,
               "the answer does not start with an HTTP/1.1 or 1.0 status line");
    FUZZ_CHECK(out.size() >= 12 && std::isdigit(static_cast<unsigned char>(out[9])) &&
                   std::isdigit(static_cast<unsigned char>(out[10])) &&
                   std::isdigit(static_cast<unsigned char>(out[11])),
               "the status line has no three-digit status");
  }
  FUZZ_CHECK(g_largest_body.load() <= kMaxBody, "a handler got a body over the limit");
  // Still serving: a plain GET gets its 200 now and then.
  if (++runs % 256 == 0) {
    static const char kGet[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    std::string ok = Exchange(server->port(), reinterpret_cast<const uint8_t*>(kGet), sizeof kGet - 1);
    FUZZ_CHECK(ok.rfind("HTTP/1.1 200", 0) == 0, "a plain GET after the inputs is not answered 200");
  }
  return 0;
}
