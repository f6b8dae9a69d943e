// StatusServer: nodevol-provisioner's HTTP endpoint for Prometheus and the
// kubelet's probes (the shared httpd::HttpServer, GET/HEAD only):
//   /metrics  the ProvisionerMetrics exposition; `refresh` runs first, to
//             copy scrape-time gauges (nodes, leader, queue depths) in
//   /healthz  200 "ok" while the process serves at all (liveness)
//   /readyz   200 "ok" when `ready` says so, else 503 "not ready: <reason>"
// With leader election `ready` must not depend on leading: a standby
// replica is ready, or a rollout of 2 replicas would never complete.
// Callbacks run on the server's thread and must be thread-safe.
#pragma once

#include <functional>
#include <string>

#include "base/status.h"
#include "httpd/http_server.h"
#include "metrics/metrics.h"

namespace nodevol::provisioner {

class StatusServer {
 public:
  struct Options {
    const ProvisionerMetrics* metrics = nullptr;  // required; outlives the server
    std::function<void()> refresh;                 // optional
    // True when ready; otherwise false with *reason set ("caches not synced").
    // Unset: always ready.
    std::function<bool(std::string* reason)> ready;
  };

  explicit StatusServer(Options options);

  // "host:port" or "[v6]:port" (port 0 picks one); errors name the address.
  Status Start(const std::string& address) { return server_.Start(address); }
  int port() const { return server_.port(); }
  void Stop() { server_.Stop(); }

 private:
  static httpd::Handlers MakeHandlers(Options options);

  httpd::HttpServer server_;
};

}  // namespace nodevol::provisioner
