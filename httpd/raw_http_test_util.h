// Raw HTTP/1.1 over a loopback socket, for tests of the programs' HTTP
// servers: the exact bytes sent, everything read back until the server
// closes, with a 5 s receive timeout so a hung server fails the test.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace nodevol::testing {

inline int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{5, 0};  // a hung server fails the test instead of hanging it
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Sends raw request bytes and returns everything read until the server closes.
inline std::string RoundTrip(int port, const std::string& request) {
  int fd = Connect(port);
  if (fd < 0) return "<connect failed>";
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, n);
  close(fd);
  return out;
}

inline std::string Get(int port, const std::string& method, const std::string& path) {
  return RoundTrip(port, method + " " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
}

inline std::string Body(const std::string& response) {
  size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "<no header end>" : response.substr(at + 4);
}

}  // namespace nodevol::testing
