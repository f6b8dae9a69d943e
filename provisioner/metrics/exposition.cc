#include "metrics/exposition.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace nodevol::provisioner::exposition {
namespace {

void AppendUint(std::string& out, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// Shortest round-trip digits, written as Go's client writes them
// (strconv 'g' with its thresholds): fixed from 1e-4 up to 1e21 (0.0005,
// 2.5), an exponent outside (1e-05, 1e+21), so bucket labels match other
// exporters' le="0.0005". Prometheus spells NaN, +Inf and -Inf.
void AppendDouble(std::string& out, double v) {
  if (std::isnan(v)) { out += "NaN"; return; }
  if (std::isinf(v)) { out += v > 0 ? "+Inf" : "-Inf"; return; }
  char buf[64];
  const double a = std::fabs(v);
  const bool fixed = a == 0 || (a >= 1e-4 && a < 1e21);
  auto r = fixed ? std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed)
                 : std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  out.append(buf, r.ptr);
}

void AppendSeries(std::string& out, std::string_view name, std::initializer_list<Label> labels,
                  const Label* extra) {
  out.append(name);
  if (labels.size() == 0 && !extra) {
    out += ' ';
    return;
  }
  out += '{';
  bool first = true;
  auto one = [&](const Label& l) {
    if (!first) out += ',';
    first = false;
    out.append(l.first).append("=\"");
    AppendLabelValue(out, l.second);
    out += '"';
  };
  for (const Label& l : labels) one(l);
  if (extra) one(*extra);
  out += "} ";
}

}  // namespace

void AppendLabelValue(std::string& out, std::string_view value) {
  for (char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
}

void AppendFamily(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out.append("# HELP ").append(name).append(" ");
  for (char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  out.append("\n# TYPE ").append(name).append(" ").append(type).append("\n");
}

void AppendSample(std::string& out, std::string_view name, std::initializer_list<Label> labels, uint64_t value) {
  AppendSeries(out, name, labels, nullptr);
  AppendUint(out, value);
  out += '\n';
}

void AppendSample(std::string& out, std::string_view name, std::initializer_list<Label> labels, double value) {
  AppendSeries(out, name, labels, nullptr);
  AppendDouble(out, value);
  out += '\n';
}

void Observe(std::span<const double> bounds, double value, HistogramData* h) {
  if (!(value >= 0)) value = 0;
  if (h->counts.size() != bounds.size() + 1) h->counts.assign(bounds.size() + 1, 0);
  // le is inclusive: a value equal to a bound belongs to that bound's bucket.
  ++h->counts[std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin()];
  h->sum += value;
  ++h->count;
}

void AppendHistogram(std::string& out, std::string_view name, std::initializer_list<Label> labels,
                     std::span<const double> bounds, const HistogramData& h) {
  const std::string bucket = std::string(name) + "_bucket";
  uint64_t cumulative = 0;
  std::string le;
  for (size_t i = 0; i <= bounds.size(); ++i) {
    if (i < h.counts.size()) cumulative += h.counts[i];
    le.clear();
    if (i < bounds.size()) AppendDouble(le, bounds[i]);
    else le = "+Inf";
    Label extra{"le", le};
    AppendSeries(out, bucket, labels, &extra);
    AppendUint(out, cumulative);
    out += '\n';
  }
  AppendSample(out, std::string(name) + "_sum", labels, h.sum);
  AppendSample(out, std::string(name) + "_count", labels, h.count);
}

}  // namespace nodevol::provisioner::exposition
