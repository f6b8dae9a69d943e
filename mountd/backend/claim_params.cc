#include "backend/claim_params.h"

#include <cstdint>

namespace nodevol {
namespace {

constexpr size_t kMaxValueBytes = 4096;
constexpr size_t kMaxKeyBytes = 253 + 1 + 63 - 1;  // prefix/name, as Kubernetes allows

// The offset of the first byte that is not valid UTF-8 of an allowed code
// point (none of C0, DEL, C1), or npos.
size_t FirstBadByte(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n;
    uint32_t v, min;
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) return i;
      ++i;
      continue;
    }
    if ((c & 0xe0) == 0xc0) { n = 2; v = c & 0x1f; min = 0x80; }
    else if ((c & 0xf0) == 0xe0) { n = 3; v = c & 0x0f; min = 0x800; }
    else if ((c & 0xf8) == 0xf0) { n = 4; v = c & 0x07; min = 0x10000; }
    else return i;
    if (i + n > s.size()) return i;
    for (size_t k = 1; k < n; ++k) {
      auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return i;
      v = (v << 6) | (d & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff) || v <= 0x9f) return i;
    i += n;
  }
  return std::string::npos;
}

}  // namespace

bool IsClaimParam(const std::string& k) {
  auto starts = [&](const char* p) { return k.rfind(p, 0) == 0 && k.size() > std::char_traits<char>::length(p); };
  return k == "nodevol.io/pvc-namespace" || k == "nodevol.io/pvc-name" || k == "nodevol.io/pv-name" ||
         k == "nodevol.io/storage-class" || k == "nodevol.io/reclaim-policy" || k == "nodevol.io/provisioner" ||
         starts("nodevol.io/pvc-annotation.") || starts("nodevol.io/pvc-label.");
}

Status CheckClaimParam(const std::string& key, const std::string& value) {
  for (const char* prefix : {"nodevol.io/pvc-annotation.", "nodevol.io/pvc-label."}) {
    if (key.rfind(prefix, 0) != 0) continue;
    std::string name = key.substr(std::char_traits<char>::length(prefix));
    bool plain = name.size() <= kMaxKeyBytes;
    for (char c : name)
      plain = plain && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                        c == '_' || c == '/' || c == '-');
    if (!plain)
      return Status::InvalidArgument(std::string("parameter ") + prefix + "<key>: the key must be a Kubernetes key "
                                     "(letters, digits, '.', '_', '/', '-'; at most " +
                                     std::to_string(kMaxKeyBytes) + " bytes)");
  }
  if (value.size() > kMaxValueBytes)
    return Status::InvalidArgument("parameter " + key + ": the value has " + std::to_string(value.size()) +
                                   " bytes; at most " + std::to_string(kMaxValueBytes));
  if (size_t bad = FirstBadByte(value); bad != std::string::npos)
    return Status::InvalidArgument("parameter " + key + ": the value has a control character or invalid UTF-8 at byte " +
                                   std::to_string(bad) + "; claim values must be printable text");
  return Status::Ok();
}

const char* ClaimParamList() {
  return "nodevol.io/pvc-namespace, nodevol.io/pvc-name, nodevol.io/pv-name, nodevol.io/pvc-annotation.KEY, "
         "nodevol.io/pvc-label.KEY, nodevol.io/storage-class, nodevol.io/reclaim-policy, nodevol.io/provisioner";
}

}  // namespace nodevol
