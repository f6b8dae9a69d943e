#include "metrics/http_server.h"

namespace nodevol::metrics {

HttpServer::HttpServer(const Registry* registry)
    : server_(
          {
              {"/metrics",
               [registry] {
                 return httpd::Response{200, registry->Render(), httpd::kPrometheusContentType};
               }},
              {"/healthz", [] { return httpd::Response{200, "ok", httpd::kTextContentType}; }},
          },
          "metrics") {}

}  // namespace nodevol::metrics
