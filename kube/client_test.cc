// The client's answer to a server that sheds load: a 429, or a 5xx with a
// Retry-After, is sent again after the time asked for, as client-go does;
// anything else is the caller's to retry. The server is httpd's HttpServer
// on loopback, answering as kube-apiserver's priority and fairness does
// (a Status with details.retryAfterSeconds); the client against the real
// apiserver, with faults from a proxy, is tests/k8s/apiserver_faults_test.sh.
#include "kube/client.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "httpd/http_server.h"

namespace nodevol::kube {
namespace {

using nlohmann::json;

// A GET path answered `failures` times with `status` (Retry-After 1 s when
// retry_after), then 200.
struct Server {
  Server(int status, int failures, bool retry_after)
      : http({{"/api/v1/namespaces/ns/configmaps/a",
               [=, this] {
                 int n = ++calls;
                 if (n > failures) {
                   json cm = {{"kind", "ConfigMap"}, {"metadata", {{"name", "a"}}}};
                   return httpd::Response{200, cm.dump(), "application/json"};
                 }
                 json st = {{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
                            {"message", "shed"}, {"code", status}};
                 if (retry_after) st["details"] = {{"retryAfterSeconds", 1}};
                 return httpd::Response{status, st.dump(), "application/json"};
               }}},
             "test apiserver") {}

  std::unique_ptr<Client> Connect(int throttle_retries = 10) {
    EXPECT_TRUE(http.Start("127.0.0.1:0").ok());
    Config config;
    config.server = "http://127.0.0.1:" + std::to_string(http.port());
    ClientOptions options;
    options.throttle_retries = throttle_retries;
    std::unique_ptr<Client> client;
    EXPECT_TRUE(Client::New(config, options, &client).ok());
    return client;
  }

  std::atomic<int> calls{0};
  httpd::HttpServer http;
};

TEST(KubeClientThrottle, A429IsSentAgainAfterTheTimeAskedFor) {
  Server s(429, 2, true);
  auto c = s.Connect();
  json out;
  Result r = c->Get("/api/v1/namespaces/ns/configmaps/a", &out);
  EXPECT_TRUE(r.ok()) << r.ToString();
  EXPECT_EQ(out["metadata"]["name"], "a");
  EXPECT_EQ(s.calls, 3);
}

TEST(KubeClientThrottle, A5xxWithRetryAfterIsSentAgainOneWithoutIsNot) {
  Server with(503, 1, true);
  auto c = with.Connect();
  json out;
  EXPECT_TRUE(c->Get("/api/v1/namespaces/ns/configmaps/a", &out).ok());
  EXPECT_EQ(with.calls, 2);

  Server without(500, 1, false);
  auto d = without.Connect();
  Result r = d->Get("/api/v1/namespaces/ns/configmaps/a", &out);
  EXPECT_EQ(r.code(), Result::Code::kServerError) << r.ToString();
  EXPECT_EQ(without.calls, 1) << "a plain 500 is the caller's to retry";
}

TEST(KubeClientThrottle, GivesUpAfterItsRetriesWithTheLastAnswer) {
  Server s(429, 100, true);
  auto c = s.Connect(/*throttle_retries=*/2);
  json out;
  Result r = c->Get("/api/v1/namespaces/ns/configmaps/a", &out);
  EXPECT_EQ(r.code(), Result::Code::kTooManyRequests) << r.ToString();
  EXPECT_EQ(s.calls, 3);
}

}  // namespace
}  // namespace nodevol::kube
