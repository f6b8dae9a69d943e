// Metrics: counters, latency histograms and gauges nodevold exposes in the
// Prometheus text format (version 0.0.4) on a localhost HTTP address.
//
// Thread-safe; ObserveRpc is on every RPC's path and must stay cheap (no
// allocation once a method/code pair has been seen).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace nodevol::metrics {

class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // One finished RPC: method ("Publish"), gRPC code name ("OK",
  // "INVALID_ARGUMENT"), duration. Feeds
  //   nodevol_rpc_total{method,code}            counter
  //   nodevol_rpc_errors_total{method}          counter (code != OK)
  //   nodevol_rpc_duration_seconds{method}      histogram
  void ObserveRpc(std::string_view method, std::string_view code, double seconds);

  // Current figures of one pool. Feeds gauges
  //   nodevol_pool_total_bytes{pool,backend}, nodevol_pool_free_bytes{...},
  //   nodevol_pool_allocated_bytes{...}, nodevol_pool_volumes{...},
  //   nodevol_pool_snapshots{...}
  void SetPool(std::string_view pool, std::string_view backend, uint64_t total,
               uint64_t free, uint64_t allocated, uint64_t volumes, uint64_t snapshots = 0);

  // How full a thin pool really is: gauges
  //   nodevol_pool_thin_data_percent{pool,backend},
  //   nodevol_pool_thin_metadata_percent{pool,backend} (thin pools only).
  void SetThinUsage(std::string_view pool, double data_percent, double metadata_percent);

  // Number of drift findings since start: nodevol_drift_findings gauge.
  void SetDrift(uint64_t findings);

  // How long the oldest write to the state directory still running has
  // run, 0 when none is: nodevol_state_write_oldest_seconds gauge. A disk
  // that stopped answering shows as a figure that keeps growing, which an
  // alert can watch (/healthz only turns 503 past the limit).
  void SetStateWriteOldest(double seconds);

  // The whole exposition, with # HELP and # TYPE lines.
  std::string Render() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nodevol::metrics
