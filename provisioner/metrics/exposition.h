// Helpers writing the Prometheus text exposition format, version 0.0.4:
// "# HELP"/"# TYPE" lines, series with escaped label values, numbers, and
// histograms with cumulative buckets, +Inf, _sum and _count.
// Pure functions appending to a string; no locking, no state.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nodevol::provisioner::exposition {

using Label = std::pair<std::string_view, std::string_view>;  // name, value

// Backslash, double quote and newline escaped as the format requires.
void AppendLabelValue(std::string& out, std::string_view value);
// HELP text escapes backslash and newline only.
void AppendFamily(std::string& out, std::string_view name, std::string_view type, std::string_view help);
// One sample line: name{k="v",...} value\n (no braces without labels).
void AppendSample(std::string& out, std::string_view name, std::initializer_list<Label> labels, uint64_t value);
void AppendSample(std::string& out, std::string_view name, std::initializer_list<Label> labels, double value);

// Per-bucket counts of a histogram: counts[i] observations fell in
// (bounds[i-1], bounds[i]]; counts has bounds.size() + 1 entries, the last
// for above every bound.
struct HistogramData {
  std::vector<uint64_t> counts;
  double sum = 0;
  uint64_t count = 0;
};

// Adds one observation; bounds must be sorted. NaN and negative values count
// as 0 so _sum never decreases (rate() relies on it).
void Observe(std::span<const double> bounds, double value, HistogramData* h);

// name_bucket{labels...,le="b"} (cumulative, ending with le="+Inf"),
// name_sum{labels} and name_count{labels}.
void AppendHistogram(std::string& out, std::string_view name, std::initializer_list<Label> labels,
                     std::span<const double> bounds, const HistogramData& h);

}  // namespace nodevol::provisioner::exposition
