#include "metrics/metrics.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <mutex>

namespace nodevol::metrics {
namespace {

// Upper bounds in seconds. A mount daemon's RPCs range from sub-millisecond
// bookkeeping to multi-second mkfs/mount calls, hence 0.5 ms .. 10 s.
constexpr std::array<double, 14> kBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                            0.1,    0.25,  0.5,    1,     2.5,  5,     10};
// The same bounds as they appear in le="...": written out rather than
// formatted so they read like other exporters' (0.0005, not 5e-04).
constexpr std::array<std::string_view, kBounds.size()> kBoundLabels = {
    "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05",
    "0.1",    "0.25",  "0.5",    "1",     "2.5",  "5",     "10"};

struct MethodStats {
  std::map<std::string, uint64_t, std::less<>> codes;  // code name -> count
  uint64_t errors = 0;
  std::array<uint64_t, kBounds.size() + 1> buckets{};  // per bucket, last is +Inf
  uint64_t count = 0;
  double sum = 0;
};

struct PoolStats {
  std::string backend;
  uint64_t total = 0, free = 0, allocated = 0, volumes = 0, snapshots = 0;
  std::optional<double> data_percent, metadata_percent;  // thin pools
};

// Label values may hold anything a caller passes; the format requires
// backslash, double quote and newline to be escaped.
void AppendEscaped(std::string& out, std::string_view v) {
  for (char c : v) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
}

void AppendUint(std::string& out, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// Shortest round-trip form; Prometheus spells infinities +Inf/-Inf.
void AppendDouble(std::string& out, double v) {
  if (std::isnan(v)) { out += "NaN"; return; }
  if (std::isinf(v)) { out += v > 0 ? "+Inf" : "-Inf"; return; }
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

void AppendFamily(std::string& out, std::string_view name, std::string_view type,
                  std::string_view help) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

// Writes `name{k1="v1",k2="v2"} `; the caller appends the value.
void AppendSeries(std::string& out, std::string_view name,
                  std::initializer_list<std::pair<std::string_view, std::string_view>> labels) {
  out.append(name);
  if (labels.size() > 0) {
    out += '{';
    bool first = true;
    for (const auto& [k, v] : labels) {
      if (!first) out += ',';
      first = false;
      out.append(k).append("=\"");
      AppendEscaped(out, v);
      out += '"';
    }
    out += '}';
  }
  out += ' ';
}

}  // namespace

struct Registry::Impl {
  mutable std::mutex mu;
  std::map<std::string, MethodStats, std::less<>> methods;
  std::map<std::string, PoolStats, std::less<>> pools;
  uint64_t drift = 0;
  double state_write_oldest = 0;
};

Registry::Registry() : impl_(std::make_unique<Impl>()) {}
Registry::~Registry() = default;

void Registry::ObserveRpc(std::string_view method, std::string_view code, double seconds) {
  // A negative or NaN duration is a caller bug; counting it as 0 keeps _sum
  // monotonic, which rate() relies on.
  if (!(seconds >= 0)) seconds = 0;
  const size_t bucket = std::lower_bound(kBounds.begin(), kBounds.end(), seconds) - kBounds.begin();

  std::lock_guard lock(impl_->mu);
  // find() with string_view first: the std::string keys are only built the
  // first time a method/code pair shows up.
  auto m = impl_->methods.find(method);
  if (m == impl_->methods.end()) m = impl_->methods.emplace(std::string(method), MethodStats{}).first;
  MethodStats& s = m->second;
  auto c = s.codes.find(code);
  if (c == s.codes.end()) c = s.codes.emplace(std::string(code), 0).first;
  ++c->second;
  if (code != "OK") ++s.errors;
  ++s.buckets[bucket];
  ++s.count;
  s.sum += seconds;
}

void Registry::SetPool(std::string_view pool, std::string_view backend, uint64_t total,
                       uint64_t free, uint64_t allocated, uint64_t volumes, uint64_t snapshots) {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->pools.find(pool);
  if (it == impl_->pools.end()) it = impl_->pools.emplace(std::string(pool), PoolStats{}).first;
  PoolStats& p = it->second;
  if (p.backend != backend) p.backend = backend;
  p.total = total;
  p.free = free;
  p.allocated = allocated;
  p.volumes = volumes;
  p.snapshots = snapshots;
}

void Registry::SetThinUsage(std::string_view pool, double data_percent, double metadata_percent) {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->pools.find(pool);
  if (it == impl_->pools.end()) it = impl_->pools.emplace(std::string(pool), PoolStats{}).first;
  it->second.data_percent = data_percent;
  it->second.metadata_percent = metadata_percent;
}

void Registry::SetDrift(uint64_t findings) {
  std::lock_guard lock(impl_->mu);
  impl_->drift = findings;
}

void Registry::SetStateWriteOldest(double seconds) {
  if (!(seconds >= 0)) seconds = 0;
  std::lock_guard lock(impl_->mu);
  impl_->state_write_oldest = seconds;
}

std::string Registry::Render() const {
  std::string out;
  out.reserve(4096);
  // Formatting under the lock is cheap (a few dozen series) and simpler than
  // snapshotting; scrapes are rare next to RPCs.
  std::lock_guard lock(impl_->mu);

  AppendFamily(out, "nodevol_rpc_total", "counter", "Finished RPCs by method and gRPC code.");
  for (const auto& [method, s] : impl_->methods) {
    for (const auto& [code, n] : s.codes) {
      AppendSeries(out, "nodevol_rpc_total", {{"method", method}, {"code", code}});
      AppendUint(out, n);
      out += '\n';
    }
  }

  AppendFamily(out, "nodevol_rpc_errors_total", "counter", "Finished RPCs whose code was not OK.");
  for (const auto& [method, s] : impl_->methods) {
    AppendSeries(out, "nodevol_rpc_errors_total", {{"method", method}});
    AppendUint(out, s.errors);
    out += '\n';
  }

  AppendFamily(out, "nodevol_rpc_duration_seconds", "histogram", "RPC latency in seconds.");
  for (const auto& [method, s] : impl_->methods) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= kBounds.size(); ++i) {
      cumulative += s.buckets[i];
      std::string_view le = i < kBounds.size() ? kBoundLabels[i] : "+Inf";
      AppendSeries(out, "nodevol_rpc_duration_seconds_bucket", {{"method", method}, {"le", le}});
      AppendUint(out, cumulative);
      out += '\n';
    }
    AppendSeries(out, "nodevol_rpc_duration_seconds_sum", {{"method", method}});
    AppendDouble(out, s.sum);
    out += '\n';
    AppendSeries(out, "nodevol_rpc_duration_seconds_count", {{"method", method}});
    AppendUint(out, s.count);
    out += '\n';
  }

  struct PoolGauge {
    std::string_view name, help;
    uint64_t PoolStats::*field;
  };
  static constexpr PoolGauge kPoolGauges[] = {
      {"nodevol_pool_total_bytes", "Pool capacity in bytes.", &PoolStats::total},
      {"nodevol_pool_free_bytes", "Pool free space in bytes.", &PoolStats::free},
      {"nodevol_pool_allocated_bytes", "Bytes allocated to volumes in the pool.",
       &PoolStats::allocated},
      {"nodevol_pool_volumes", "Volumes in the pool.", &PoolStats::volumes},
      {"nodevol_pool_snapshots", "Snapshots in the pool (docs/snapshots.md).", &PoolStats::snapshots},
  };
  for (const PoolGauge& g : kPoolGauges) {
    AppendFamily(out, g.name, "gauge", g.help);
    for (const auto& [pool, p] : impl_->pools) {
      AppendSeries(out, g.name, {{"pool", pool}, {"backend", p.backend}});
      AppendUint(out, p.*g.field);
      out += '\n';
    }
  }

  struct ThinGauge {
    const char* name;
    const char* help;
    std::optional<double> PoolStats::*field;
  };
  static constexpr ThinGauge kThinGauges[] = {
      {"nodevol_pool_thin_data_percent", "Used share of a thin pool's data space (lvm data_percent).",
       &PoolStats::data_percent},
      {"nodevol_pool_thin_metadata_percent", "Used share of a thin pool's metadata (lvm metadata_percent).",
       &PoolStats::metadata_percent},
  };
  for (const ThinGauge& g : kThinGauges) {
    AppendFamily(out, g.name, "gauge", g.help);
    for (const auto& [pool, p] : impl_->pools) {
      if (!(p.*g.field)) continue;
      AppendSeries(out, g.name, {{"pool", pool}, {"backend", p.backend}});
      AppendDouble(out, *(p.*g.field));
      out += '\n';
    }
  }

  AppendFamily(out, "nodevol_drift_findings", "gauge",
               "Drift findings (state vs. system) since the daemon started.");
  AppendSeries(out, "nodevol_drift_findings", {});
  AppendUint(out, impl_->drift);
  out += '\n';

  AppendFamily(out, "nodevol_state_write_oldest_seconds", "gauge",
               "How long the oldest write to the state directory still running has run (0: none).");
  AppendSeries(out, "nodevol_state_write_oldest_seconds", {});
  AppendDouble(out, impl_->state_write_oldest);
  out += '\n';
  return out;
}

}  // namespace nodevol::metrics
