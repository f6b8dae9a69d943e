#include "base/size.h"

#include <array>
#include <charconv>
#include <cstdio>
#include <limits>
#include <utility>

namespace nodevol {

std::optional<uint64_t> ParseSize(std::string_view text) {
  static constexpr std::array<std::pair<std::string_view, uint64_t>, 9> kSuffixes{{
      {"", 1},
      {"k", 1000ULL},
      {"M", 1000ULL * 1000},
      {"G", 1000ULL * 1000 * 1000},
      {"T", 1000ULL * 1000 * 1000 * 1000},
      {"Ki", 1ULL << 10},
      {"Mi", 1ULL << 20},
      {"Gi", 1ULL << 30},
      {"Ti", 1ULL << 40},
  }};
  const char* begin = text.data();
  const char* end = begin + text.size();
  // from_chars takes no sign or space, so "-1", "+1" and " 1" fail here.
  if (text.empty() || text.front() < '0' || text.front() > '9') return std::nullopt;
  uint64_t number = 0;
  auto [rest, ec] = std::from_chars(begin, end, number);
  if (ec != std::errc() || number == 0) return std::nullopt;
  std::string_view suffix(rest, static_cast<size_t>(end - rest));
  for (const auto& [name, factor] : kSuffixes) {
    if (suffix != name) continue;
    if (number > std::numeric_limits<uint64_t>::max() / factor) return std::nullopt;
    return number * factor;
  }
  return std::nullopt;
}

std::string FormatSize(uint64_t bytes) {
  static constexpr std::array<const char*, 7> kUnits{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + "B";
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  // 1023.96 KiB would print as "1024.0KiB": move up a unit before that.
  while (value >= 1023.95 && unit + 1 < kUnits.size()) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%s", value, kUnits[unit]);
  return buf;
}

}  // namespace nodevol
