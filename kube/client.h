// Client: a Kubernetes REST client over HTTPS (Boost.Beast over OpenSSL,
// kube/connection.h), safe to use from many threads at once.
//
// Paths are API paths ("/api/v1/namespaces/ns/configmaps/x"); objects are
// JSON. Every call returns a Result that tells the outcomes callers branch on
// apart (Conflict vs AlreadyExists, Expired, TooManyRequests...), keeping
// the server's message. Each request has a connect and a total timeout. A
// 401 re-reads the token file and retries once. Connections (HTTP/1.1,
// one request at a time each) are kept in a pool and reused; a new one
// reads the kubeconfig's files again. Tokens and keys are never logged.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "base/version.h"
#include "kube/http_api.h"
#include "kube/config.h"
#include "kube/connection.h"
#include "kube/result.h"
#include "kube/token_source.h"

namespace nodevol::kube {

struct ClientOptions {
  std::chrono::milliseconds connect_timeout{10000};
  std::chrono::milliseconds request_timeout{30000};  // whole request, non-streaming
  std::string user_agent = std::string("nodevol-provisioner/") + nodevol::Version();
  std::chrono::seconds token_refresh{60};
  // A 429, or a 500-504 with Retry-After, is sent again after the time the
  // server asked for (at most 60 s a time), this many times, as client-go's
  // REST client does (maxRetries 10): the apiserver's priority and fairness
  // sheds load that way and means "later", not "failed". Not for streams.
  int throttle_retries = 10;
};

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  int limit = 500;
  // "" = a consistent read from etcd; "0" = any cached state (watch cache).
  std::string resource_version;
};

class Client : public HttpApi {
 public:
  // Validates the config (server URL) and prepares the client.
  static Status New(Config config, ClientOptions options, std::unique_ptr<Client>* out);
  ~Client() override;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Get, Create, Update, MergePatch, Delete: HttpApi's (http_api.h).

  // All pages of a collection (`limit` per page, following metadata.continue;
  // an expired continue token restarts the list). *out gets {"items": [...],
  // "metadata": {"resourceVersion": <of the list>}}.
  Result List(const std::string& path, const ListOptions& options, nlohmann::json* out);
  // The same, handing each item to `each` as its page arrives instead of
  // collecting them (an informer's list of 10,000 objects never holds all
  // their JSON at once). `restart` is called when an expired continue token
  // restarts the list: forget the items seen. *list_rv: the list's version.
  Result ListEach(const std::string& path, const ListOptions& options,
                  const std::function<void(nlohmann::json&&)>& each, const std::function<void()>& restart,
                  std::string* list_rv);
  // A streaming GET (watches): `on_data` receives the body of a 2xx answer
  // as it arrives and may return false to stop. Ends when the server ends
  // the body (OK), at `total_timeout`, or soon (about a second at most)
  // after *cancel becomes true (kCancelled).
  Result Stream(const std::string& path_and_query, std::chrono::seconds total_timeout,
                const std::function<bool(std::string_view)>& on_data, const std::atomic<bool>* cancel);

  const Config& config() const { return config_; }

  // Percent-encodes a query parameter value.
  static std::string EscapeQuery(std::string_view value);

  struct Request;  // one request and its answer; defined in client.cc

 protected:
  Result Do(const char* method, const std::string& path, std::string_view content_type, const std::string* body,
            nlohmann::json* out) override;

 private:
  Client(Config config, ClientOptions options);
  Result Perform(Request& request);
  // One attempt: an exchange on a pooled connection or a new one.
  Result Attempt(Request& request);
  // How long to wait before sending request again after result (the
  // server's Retry-After; ClientOptions::throttle_retries), or nothing.
  std::optional<std::chrono::seconds> ThrottleWait(const Request& request, const Result& result, int throttled) const;
  std::unique_ptr<Connection> TakeIdle();
  void Keep(std::unique_ptr<Connection> connection);

  const Config config_;
  const ClientOptions options_;
  TokenSource token_;
  Endpoint endpoint_;   // the host to connect to, and the name to verify
  std::string prefix_;  // the server URL's path, before every request's
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;
};

}  // namespace nodevol::kube
