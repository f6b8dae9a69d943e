// TcpRelay: the TCP port of nodevold's mutual-TLS listener, with a cap on
// connections.
//
// gRPC 1.51 accepts without limit, has no max-incoming-connections
// argument, and stops a listener for good after one accept4 fails with
// EMFILE; a flood of idle TCP connections (no TLS byte needed) used to take
// every descriptor and with them the unix socket (issue 25). So nodevold
// owns the TCP socket: each accepted connection is relayed byte for byte to
// the TLS gRPC server on a private unix socket; TLS still runs end to end
// between the client and gRPC. At most `max_connections` are relayed at
// once (3 descriptors each: client, relay, gRPC's end); one more is closed
// right after accept. A connection that sends nothing within
// `first_byte_timeout` is closed (gRPC's handshake timeout covers the rest).
// Runs on its own thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

namespace nodevol {

class TcpRelay {
 public:
  struct Options {
    std::string listen;        // host:port, as --tls-listen ([v6] allowed, port 0 picks one)
    std::string unix_path;     // the gRPC server's socket
    size_t max_connections = 64;
    std::chrono::milliseconds first_byte_timeout{10000};
  };

  TcpRelay();
  ~TcpRelay();  // Stops.
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;

  // Binds and starts relaying. UNAVAILABLE naming the address when the bind
  // fails, INVALID_ARGUMENT when it is malformed.
  Status Start(const Options& options);
  int port() const;
  // Connections relayed now, and closed at accept because of the cap.
  size_t active() const;
  uint64_t refused() const;
  // Closes the port and every relayed connection. Idempotent.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nodevol
