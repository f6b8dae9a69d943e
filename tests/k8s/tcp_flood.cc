// tcp_flood: a stranger on the pod network holding as many connections to
// a listener as it can, for the cluster tests of issue 57 (the one acceptor,
// net/acceptor.h, under the real kube-scheduler). It keeps COUNT
// connections open from SOURCE to HOST:PORT, each sending the first half
// of a TLS ClientHello and then nothing (half-open: never authenticated),
// opens a new one for every one the server closes, and every second
// prints how many it holds (connected: the handshake's bytes went out) and
// how many the server closed so far.
//   tcp_flood SOURCE HOST PORT COUNT SECONDS
// Exits 0 after SECONDS (or at SIGTERM).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

volatile sig_atomic_t stop = 0;

int Open(const sockaddr_in& from, const sockaddr_in& to) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&from), sizeof from) != 0 ||
      (::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0 && errno != EINPROGRESS)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: tcp_flood SOURCE HOST PORT COUNT SECONDS\n");
    return 2;
  }
  sockaddr_in from{}, to{};
  from.sin_family = to.sin_family = AF_INET;
  if (inet_pton(AF_INET, argv[1], &from.sin_addr) != 1 || inet_pton(AF_INET, argv[2], &to.sin_addr) != 1) {
    std::fprintf(stderr, "tcp_flood: SOURCE and HOST must be IPv4 addresses\n");
    return 2;
  }
  to.sin_port = htons(static_cast<uint16_t>(std::atoi(argv[3])));
  const size_t count = std::strtoul(argv[4], nullptr, 10);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(std::atoi(argv[5]));
  signal(SIGTERM, [](int) { stop = 1; });
  signal(SIGPIPE, SIG_IGN);
  // A ClientHello's record header and the start of the handshake: what a
  // TLS server waits to see the rest of.
  static const unsigned char kHalfHello[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03};
  std::vector<pollfd> fds;
  std::vector<bool> sent;
  long closed = 0;
  auto report = std::chrono::steady_clock::now();
  while (!stop && std::chrono::steady_clock::now() < end) {
    while (fds.size() < count) {
      int fd = Open(from, to);
      if (fd < 0) break;
      fds.push_back({fd, POLLIN | POLLOUT, 0});
      sent.push_back(false);
    }
    ::poll(fds.data(), fds.size(), 100);
    for (size_t i = 0; i < fds.size();) {
      bool gone = fds[i].revents & (POLLERR | POLLHUP);
      if (!gone && (fds[i].revents & POLLOUT) && !sent[i]) {
        sent[i] = ::send(fds[i].fd, kHalfHello, sizeof kHalfHello, MSG_NOSIGNAL) > 0;
        fds[i].events = POLLIN;
      }
      if (!gone && (fds[i].revents & POLLIN)) {
        char buf[512];
        gone = ::recv(fds[i].fd, buf, sizeof buf, 0) <= 0;  // the server's alert, then EOF
      }
      if (gone) {
        ::close(fds[i].fd);
        fds[i] = fds.back();
        fds.pop_back();
        sent[i] = sent.back();
        sent.pop_back();
        ++closed;
        continue;
      }
      fds[i].revents = 0;
      ++i;
    }
    if (std::chrono::steady_clock::now() - report >= std::chrono::seconds(1)) {
      report = std::chrono::steady_clock::now();
      size_t connected = 0;
      for (bool b : sent) connected += b;
      std::printf("holding %zu (connected %zu), closed by the server %ld\n", fds.size(), connected, closed);
      std::fflush(stdout);
    }
  }
  for (auto& p : fds) ::close(p.fd);
  std::printf("done: closed by the server %ld\n", closed);
  return 0;
}
