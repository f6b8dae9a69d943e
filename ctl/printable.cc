#include "printable.h"

#include <cstdint>

namespace nodevol::ctl {
namespace {

// The length of the valid UTF-8 sequence at s[i] (shortest form, no
// surrogates, at most U+10FFFF), or 0; its code point in *cp.
size_t Utf8Sequence(std::string_view s, size_t i, uint32_t* cp) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  size_t n;
  uint32_t v, min;
  if (c < 0x80) { *cp = c; return 1; }
  if ((c & 0xe0) == 0xc0) { n = 2; v = c & 0x1f; min = 0x80; }
  else if ((c & 0xf0) == 0xe0) { n = 3; v = c & 0x0f; min = 0x800; }
  else if ((c & 0xf8) == 0xf0) { n = 4; v = c & 0x07; min = 0x10000; }
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
    v = (v << 6) | (b(i + k) & 0x3f);
  }
  if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
  *cp = v;
  return n;
}

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
