#include "metrics/status_server.h"

#include <utility>

namespace nodevol::provisioner {

StatusServer::StatusServer(Options options) : server_(MakeHandlers(std::move(options)), "metrics") {}

httpd::Handlers StatusServer::MakeHandlers(Options o) {
  httpd::Handlers h;
  h["/metrics"] = [metrics = o.metrics, refresh = o.refresh] {
    if (refresh) refresh();
    return httpd::Response{200, metrics ? metrics->Render() : "", httpd::kPrometheusContentType};
  };
  h["/healthz"] = [] { return httpd::Response{200, "ok", httpd::kTextContentType}; };
  h["/readyz"] = [ready = std::move(o.ready)] {
    std::string reason;
    if (!ready || ready(&reason)) return httpd::Response{200, "ok", httpd::kTextContentType};
    if (reason.empty()) reason = "no reason given";
    return httpd::Response{503, "not ready: " + reason + "\n", httpd::kTextContentType};
  };
  return h;
}

}  // namespace nodevol::provisioner
