#include "backend/lvm/lv_name.h"

#include <openssl/sha.h>

#include <array>
#include <cstdio>

namespace nodevol {
namespace {

// lvm refuses LV names containing these (its own sub-LVs use them).
constexpr std::array<std::string_view, 14> kReserved = {
    "_cdata", "_cmeta", "_corig", "_cpool", "_cvol", "_iorig", "_mimage", "_mlog",
    "_pmspare", "_rimage", "_rmeta", "_tdata", "_tmeta", "_vorigin"};

bool LvmChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' || c == '_' ||
         c == '.' || c == '-';
}

}  // namespace

Status ValidateLvmName(std::string_view what, std::string_view name) {
  std::string q = std::string(what) + " \"" + std::string(name) + "\"";
  if (name.empty() || name.size() > 127) return Status::InvalidArgument(q + " must be 1-127 characters");
  if (name == "." || name == ".." || name[0] == '-')
    return Status::InvalidArgument(q + " is not a valid LVM name (\".\", \"..\" and a leading '-' are not allowed)");
  for (char c : name)
    if (!LvmChar(c)) return Status::InvalidArgument(q + " may only contain letters, digits and + _ . -");
  for (std::string_view r : kReserved)
    if (name.find(r) != std::string_view::npos)
      return Status::InvalidArgument(q + " contains \"" + std::string(r) + "\", which lvm reserves");
  if (name.rfind("snapshot", 0) == 0 || name.rfind("pvmove", 0) == 0)
    return Status::InvalidArgument(q + " starts with a prefix lvm reserves (snapshot, pvmove)");
  return Status::Ok();
}

namespace {

std::string LvName(const std::string& prefix, std::string_view volume) {
  std::string plain = prefix + std::string(volume);
  if (plain.size() <= 67 && ValidateLvmName("", plain).ok()) return plain;
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(volume.data()), volume.size(), digest);
  std::string out = prefix;
  for (char c : volume.substr(0, 40)) out += LvmChar(c) ? c : '_';
  // A reserved word in the kept prefix must not survive either.
  for (std::string_view r : kReserved)
    for (size_t at; (at = out.find(r)) != std::string::npos;) out[at] = '.';
  char hex[3];
  out += '-';
  for (int i = 0; i < 8; ++i) {
    std::snprintf(hex, sizeof hex, "%02x", digest[i]);
    out += hex;
  }
  return out;
}

}  // namespace

std::string LvNameFor(std::string_view volume) { return LvName("nv-", volume); }
std::string SnapshotLvNameFor(std::string_view snapshot) { return LvName("nvs-", snapshot); }
std::string GrowLvNameFor(std::string_view volume) { return LvName("nvg-", volume); }

}  // namespace nodevol
