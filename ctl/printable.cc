#include "printable.h"

#include <cstdint>

#include "base/utf8.h"

namespace nodevol::ctl {
namespace {

void Hex(std::string* out, unsigned char c) {
  static const char* digits = "0123456789abcdef";
  *out += "\\x";
  *out += digits[c >> 4];
  *out += digits[c & 15];
}

}  // namespace

std::string Printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    size_t n = Utf8Sequence(s, i, &cp);
    if (n == 0) {  // not UTF-8: this byte alone, then resynchronise
      Hex(&out, static_cast<unsigned char>(s[i]));
      ++i;
      continue;
    }
    if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f)) {
      for (size_t k = 0; k < n; ++k) Hex(&out, static_cast<unsigned char>(s[i + k]));
    } else if (cp == '\\') {
      out += "\\\\";
    } else {
      out.append(s.substr(i, n));
    }
    i += n;
  }
  return out;
}

}  // namespace nodevol::ctl
