// Client: nodevold's Node API for the duration of one driver call.
//
// Every request shares one deadline (Config::timeout from construction), so
// a call never outlives it however the daemon behaves. A daemon that does
// not accept within connect_timeout, or errors, becomes a message that names
// the socket and what to check.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "config.h"
#include "nodevol/v1/node.grpc.pb.h"

namespace nodevol::flex {

class Client {
 public:
  explicit Client(const Config& config);

  // Waits until the socket accepts; false with a message otherwise.
  bool Connect(std::string* error);

  // One RPC under the call's deadline, e.g. Call(&v1::Node::Stub::Publish, req, &resp).
  template <typename Request, typename Response>
  grpc::Status Call(grpc::Status (v1::Node::Stub::*rpc)(grpc::ClientContext*, const Request&, Response*),
                    const Request& request, Response* response) {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_);
    return (stub_.get()->*rpc)(&ctx, request, response);
  }
  // "<what>: <the daemon's message> (<CODE>)", or for transport failures a
  // message naming the socket and the deadline.
  std::string Describe(std::string_view what, const grpc::Status& status) const;

 private:
  std::string Unreachable() const;

  Config config_;
  std::chrono::system_clock::time_point deadline_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Node::Stub> stub_;
};

}  // namespace nodevol::flex
