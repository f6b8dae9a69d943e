// Client: nodevold's flex door (proto/nodevol/v1/flex_door.proto) for the
// duration of one driver call: the Node API's messages over
// "<socket>.flex", without gRPC, whose start-up was most of the driver's
// time.
//
// Every request shares one deadline (Config::timeout from construction), so
// a call never outlives it however the daemon behaves. A daemon that does
// not accept within connect_timeout, or errors, becomes a message that names
// the socket and what to check.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "base/unique_fd.h"
#include "config.h"
#include "nodevol/v1/flex_door.pb.h"

namespace nodevol::flex {

class Client {
 public:
  explicit Client(const Config& config);

  // Connects, retrying while nodevold (re)starts, up to connect_timeout;
  // false with a message otherwise.
  bool Connect(std::string* error);

  // One request under the call's deadline. False with *error (naming the
  // socket) when no answer came; true otherwise, the daemon's status in
  // response->code().
  bool Call(v1::DoorRequest request, v1::DoorResponse* response, std::string* error);

  // "<what>: <the daemon's message> (<CODE>)".
  std::string Describe(std::string_view what, const v1::DoorResponse& response) const;

 private:
  std::string Unreachable(int err) const;

  Config config_;
  std::string door_;
  std::chrono::steady_clock::time_point deadline_;
  UniqueFd fd_;
};

}  // namespace nodevol::flex
