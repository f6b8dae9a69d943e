// HttpServer: serves GET /metrics (the Registry's exposition) and
// GET /healthz ("ok") on one TCP address, on its own thread, with
// Boost.Beast. Anything else gets 404; only GET and HEAD are accepted.
// Meant for localhost: it has no TLS and no authentication.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "metrics/metrics.h"

namespace nodevol::metrics {

class HttpServer {
 public:
  explicit HttpServer(const Registry* registry);
  ~HttpServer();  // Stops.

  // Binds "host:port" (IPv4, or [IPv6]:port; port 0 picks a free one) and
  // starts serving. INVALID_ARGUMENT for a malformed address, UNAVAILABLE when
  // the bind fails (e.g. address in use), with the address named.
  Status Start(const std::string& address);
  // Port actually bound (useful with port 0).
  int port() const;
  // Stops accepting and joins the thread. Idempotent.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nodevol::metrics
