#include "metrics/http_server.h"

namespace nodevol::metrics {

HttpServer::HttpServer(const Registry* registry, std::function<std::string()> unhealthy, size_t max_connections)
    : server_(
          {
              {"/metrics",
               [registry] {
                 return httpd::Response{200, registry->Render(), httpd::kPrometheusContentType};
               }},
              {"/healthz",
               [unhealthy = std::move(unhealthy)] {
                 std::string why = unhealthy ? unhealthy() : "";
                 if (!why.empty()) return httpd::Response{503, "unhealthy: " + why + "\n", httpd::kTextContentType};
                 return httpd::Response{200, "ok", httpd::kTextContentType};
               }},
          },
          "metrics", max_connections) {}

}  // namespace nodevol::metrics
