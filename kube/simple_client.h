// SimpleClient: kube::Api over HTTPS, one connection (connection.h) per
// call. For nodevold's enrollment, which makes a handful of calls an hour
// as the node itself. Client is the provisioner's: pooled connections,
// lists, watches, throttling, a token that rotates.
//
// Each call re-reads the kubeconfig's files (kubelet rotates its client
// certificate in place), verifies the apiserver against the CA and the
// server name, and gives up after the request timeout. Results are
// classified as Client's (result.h). Keys and tokens are never logged.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "base/status.h"
#include "kube/http_api.h"
#include "kube/config.h"
#include "kube/connection.h"

namespace nodevol::kube {

class SimpleClient : public HttpApi {
 public:
  // INVALID_ARGUMENT when the server is not an https:// URL.
  static Status New(Config config, std::string user_agent, std::chrono::milliseconds timeout,
                    std::unique_ptr<SimpleClient>* out);

  // The calls: HttpApi's (http_api.h).

 protected:
  Result Do(const char* method, const std::string& path, std::string_view content_type, const std::string* body,
            nlohmann::json* out) override;

 private:
  SimpleClient() = default;

  Config config_;
  Endpoint endpoint_;
  std::string prefix_, user_agent_;
  std::chrono::milliseconds timeout_{30000};
};

}  // namespace nodevol::kube
