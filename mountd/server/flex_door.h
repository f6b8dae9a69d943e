// FlexDoor: the FlexVolume driver's way into nodevold without gRPC
// (proto/nodevol/v1/flex_door.proto). A root-only unix socket; each
// connection carries length-prefixed DoorRequests, each answered with a
// DoorResponse by the same NodeService a gRPC call would reach (its own
// instance, Listener::kFlex), so validation, idempotence, logging, metrics
// and the stop's wait for in-flight calls are the Node API's.
//
// What stands between a local user and a mount: the socket is made with
// mode 0600 and only a peer whose SO_PEERCRED uid is 0 is answered
// (PERMISSION_DENIED otherwise). A frame longer than 1 MiB, bytes that are
// not a DoorRequest or a request with no call get INVALID_ARGUMENT and the
// connection is closed; a connection idle for `idle_timeout` is closed. At
// most `max_connections` are served at once, each on its own thread (calls
// block on mounts and lvm); one more is closed right after accept.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "base/status.h"

namespace nodevol {

class NodeService;

class FlexDoor {
 public:
  struct Options {
    std::string path;  // the socket, "<--socket>.flex"
    size_t max_connections = 64;
    std::chrono::milliseconds idle_timeout{10000};
  };

  explicit FlexDoor(NodeService* service);
  ~FlexDoor();  // Stops.
  FlexDoor(const FlexDoor&) = delete;
  FlexDoor& operator=(const FlexDoor&) = delete;

  // Listens on options.path (replacing a stale socket there) and starts
  // accepting on a thread of its own.
  Status Start(const Options& options);
  // Stops accepting, unlinks the socket, and waits (up to the deadline)
  // for the connections being served to finish. Idempotent.
  void Stop(std::chrono::steady_clock::time_point deadline);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace nodevol
