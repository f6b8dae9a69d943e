// JoinHostPort: "host:port", with an IPv6 literal in brackets
// ("[fd00::1]:9809"), as URLs and gRPC targets want it. A host already in
// brackets is kept as it is.
#pragma once

#include <string>

namespace nodevol {

inline std::string JoinHostPort(const std::string& host, const std::string& port) {
  bool v6 = host.find(':') != std::string::npos && (host.empty() || host.front() != '[');
  return (v6 ? "[" + host + "]" : host) + ":" + port;
}

inline std::string JoinHostPort(const std::string& host, int port) { return JoinHostPort(host, std::to_string(port)); }

}  // namespace nodevol
