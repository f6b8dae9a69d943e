#include "base/names.h"

#include <arpa/inet.h>

#include <string>

namespace nodevol {
namespace {

bool IsAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

// Quotes a name for a message, showing control bytes (NUL included) as \xNN.
std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s.substr(0, 80)) {
    if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > 80) out += "...";
  return out + "\"";
}

}  // namespace

namespace {

Status ValidateObjectName(const std::string& what, std::string_view name) {
  if (name.empty()) return Status::InvalidArgument(what + " name is empty");
  if (name.size() > 200)
    return Status::InvalidArgument(what + " name " + Quote(name) + " is longer than 200 characters");
  if (!IsAlnum(name[0]))
    return Status::InvalidArgument(what + " name " + Quote(name) + " must start with a letter or digit");
  for (char c : name) {
    if (!IsAlnum(c) && c != '.' && c != '_' && c != '-')
      return Status::InvalidArgument(what + " name " + Quote(name) +
                                     " may only contain letters, digits, '.', '_' and '-'");
  }
  return Status::Ok();
}

}  // namespace

Status ValidateVolumeName(std::string_view name) { return ValidateObjectName("volume", name); }
Status ValidateSnapshotName(std::string_view name) { return ValidateObjectName("snapshot", name); }

Status ValidatePoolName(std::string_view name) {
  if (name.empty()) return Status::InvalidArgument("pool name is empty");
  if (name.size() > 63)
    return Status::InvalidArgument("pool name " + Quote(name) + " is longer than 63 characters");
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok)
      return Status::InvalidArgument("pool name " + Quote(name) +
                                     " may only contain lower-case letters, digits and '-'");
  }
  if (name[0] == '-') return Status::InvalidArgument("pool name " + Quote(name) + " must start with a letter or digit");
  return Status::Ok();
}

std::string CanonicalIp(std::string_view text) {
  std::string s(text);
  unsigned char buf[16];
  char out[INET6_ADDRSTRLEN];
  if (::inet_pton(AF_INET, s.c_str(), buf) == 1) return ::inet_ntop(AF_INET, buf, out, sizeof out) ? out : "";
  if (::inet_pton(AF_INET6, s.c_str(), buf) == 1) return ::inet_ntop(AF_INET6, buf, out, sizeof out) ? out : "";
  return "";
}

Status CheckNodeIdentityName(std::string_view name) {
  std::string n(name);
  if (n.size() > 2 && n.front() == '[' && n.back() == ']') n = n.substr(1, n.size() - 2);
  unsigned char buf[16];
  if (::inet_pton(AF_INET, n.c_str(), buf) != 1 && ::inet_pton(AF_INET6, n.c_str(), buf) != 1) return Status::Ok();
  return Status::FailedPrecondition(
      "node name \"" + std::string(name) +
      "\" is an IP address: nodevol verifies a node by the DNS name in its certificate, never by an address "
      "(which the node reports itself); give the node a DNS name (kubelet --hostname-override) or, for "
      "nodevolctl, --tls-server-name NODE (docs/tls.md)");
}

}  // namespace nodevol
