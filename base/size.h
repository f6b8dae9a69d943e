// Sizes as operators write them (flags, pool options, nodevolctl): parsing
// and human formatting.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace nodevol {

inline constexpr uint64_t MiB = uint64_t{1} << 20;
inline constexpr uint64_t GiB = uint64_t{1} << 30;

// a + b, or 2^64-1 when that overflows: sums of sizes a user chose (a
// pod's claims, a node's promises) must never wrap to a small number that
// fits.
inline constexpr uint64_t SaturatingAdd(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

// What ParseSize accepts, for usage errors.
inline constexpr std::string_view kSizeForms =
    "a size is a positive whole number of bytes, optionally followed by "
    "k, M, G, T (powers of 1000) or Ki, Mi, Gi, Ti (powers of 1024), "
    "e.g. 1073741824, 500M or 10Gi";

// Parses a size like a Kubernetes quantity restricted to whole numbers:
// "1073741824", "500M", "10Gi". Returns nullopt for anything malformed,
// negative, zero or beyond 2^64-1 bytes.
std::optional<uint64_t> ParseSize(std::string_view text);

// Formats bytes with binary units and one decimal: "512B", "1.5KiB", "10.0GiB".
std::string FormatSize(uint64_t bytes);

// Exact bytes for messages where rounding would hide the point ("a volume
// of 1073741825 bytes"): "1073741825 bytes".
inline std::string ExactBytes(uint64_t bytes) { return std::to_string(bytes) + " bytes"; }

}  // namespace nodevol
