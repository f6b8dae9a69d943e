// CallRunner: what every RPC of nodevold's gRPC services does around its
// domain call, whichever front door it came through (the Node API, CSI):
// count it in flight, so a stop can wait for running operations; time it;
// log one line (method, volume, target, duration, outcome); feed the
// metrics; join a repeat of a call still in flight (server/call_join.h);
// and turn the domain's Status into a grpc::Status.
#pragma once

#include <spdlog/spdlog.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "base/call_scope.h"
#include "base/status.h"
#include "metrics/metrics.h"
#include "server/call_join.h"

namespace nodevol {

inline grpc::Status ToGrpc(const Status& st) {
  if (st.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(st.code()), st.message());
}

class CallRunner {
 public:
  // via: appended to every log line as via=<via> (empty: nothing); method
  // names are logged and counted as given.
  CallRunner(metrics::Registry* metrics, std::string via) : metrics_(metrics), via_(std::move(via)) {}

  // quiet: a health probe's call, logged at trace level and not counted.
  // The call runs in a CallScope with the client's deadline (ctx), or,
  // without a ctx (the flex door's calls), the one its caller set.
  template <typename Fn>
  grpc::Status Run(const grpc::ServerContextBase* ctx, const char* method, const std::string& volume,
                   const std::string& target, Fn fn, bool quiet = false) {
    return Serve(ctx, method, volume, target, nullptr, nullptr, fn, quiet);
  }
  // A call a client repeats while it is still running (kubelet's publish
  // retries, the provisioner's creates): an identical one in flight on
  // this front door is joined, not run again (server/call_join.h).
  template <typename Fn>
  grpc::Status RunJoined(const grpc::ServerContextBase* ctx, const char* method, const std::string& volume,
                         const std::string& target, const google::protobuf::Message& request,
                         google::protobuf::Message* response, Fn fn) {
    return Serve(ctx, method, volume, target, &request, response, fn, false);
  }

  // Waits until no call is running, or until the deadline; false on timeout.
  bool WaitIdle(std::chrono::steady_clock::time_point deadline) const {
    while (in_flight_.load() > 0) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }

 private:
  grpc::Status Serve(const grpc::ServerContextBase* ctx, const char* method, const std::string& volume,
                     const std::string& target, const google::protobuf::Message* request,
                     google::protobuf::Message* response, const std::function<Status()>& fn, bool quiet) {
    auto start = std::chrono::steady_clock::now();
    ++in_flight_;
    Status st;
    bool joined = false;
    {
      CallScope scope(ctx ? ctx->deadline() : CallScope::Deadline(), method);
      st = request ? join_.Run(CallJoin::Key(method, *request), response, fn, &joined) : fn();
    }
    --in_flight_;
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (metrics_ && !quiet) metrics_->ObserveRpc(method, st.code_name(), secs);
    auto level = !st.ok() ? spdlog::level::warn : quiet ? spdlog::level::trace : spdlog::level::info;
    spdlog::log(level, "{} volume={} target={} duration_ms={:.3f} outcome={}{}{}{}{}{}", method,
                volume.empty() ? "-" : volume, target.empty() ? "-" : target, secs * 1000, st.code_name(),
                st.ok() ? "" : " error=", st.message(), joined ? " joined=in-flight" : "", via_.empty() ? "" : " via=",
                via_);
    return ToGrpc(st);
  }

  metrics::Registry* metrics_;
  std::string via_;
  std::atomic<int> in_flight_{0};
  CallJoin join_;
};

}  // namespace nodevol
