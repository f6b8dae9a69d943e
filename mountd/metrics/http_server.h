// HttpServer: serves GET /metrics (the Registry's exposition) and
// GET /healthz on one TCP address, on its own thread: the shared
// httpd::HttpServer (httpd/http_server.h) with nodevold's two paths.
// /healthz is 200 "ok" while `unhealthy` returns "", else 503 with its
// reason (nodevold: the unix socket did not answer its last GetInfo).
// Anything else gets 404; only GET and HEAD are accepted (405 otherwise).
// Meant for localhost: it has no TLS and no authentication.
#pragma once

#include <functional>
#include <string>

#include "base/status.h"
#include "httpd/http_server.h"
#include "metrics/metrics.h"

namespace nodevol::metrics {

class HttpServer {
 public:
  // At most max_connections clients at once (httpd::HttpServer).
  explicit HttpServer(const Registry* registry, std::function<std::string()> unhealthy = nullptr,
                      size_t max_connections = 16);

  // Binds "host:port" (IPv4, or [IPv6]:port; port 0 picks a free one) and
  // starts serving. INVALID_ARGUMENT for a malformed address, UNAVAILABLE when
  // the bind fails (e.g. address in use), with the address named.
  Status Start(const std::string& address) { return server_.Start(address); }
  // Port actually bound (useful with port 0).
  int port() const { return server_.port(); }
  // Stops accepting and joins the thread. Idempotent.
  void Stop() { server_.Stop(); }

 private:
  httpd::HttpServer server_;
};

}  // namespace nodevol::metrics
