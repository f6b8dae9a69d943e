// TcpRelay: the TCP port of nodevold's mutual-TLS listener, with a cap on
// connections.
//
// gRPC 1.51 accepts without limit, has no max-incoming-connections
// argument, and stops a listener for good after one accept4 fails with
// EMFILE; a flood of idle TCP connections (no TLS byte needed) used to take
// every descriptor and with them the unix socket (issue 25). So nodevold
// owns the TCP socket: each accepted connection is relayed byte for byte to
// the TLS gRPC server on a private unix socket; TLS still runs end to end
// between the client and gRPC.
//
// Connections are taken through net::Acceptor (net/acceptor.h). A client
// is relayed to gRPC once it has sent its first bytes (a TLS client speaks
// first), so a silent stranger never reaches gRPC. The relay cannot see
// TLS, but gRPC closes every connection that has not finished the
// mutual-TLS handshake and sent its HTTP/2 settings by kTlsHandshakeTimeout
// (GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, which main sets to it): one it
// has kept a second past that has authenticated, and is never evicted.
// Until then it is a stranger: when the port is full, or its address holds
// max_per_peer connections, a newcomer takes the place of the oldest
// stranger, never that of an authenticated client; an address holds at
// most half the slots; a stranger not relayed and trusted within the
// deadline and two seconds is closed.
//
// gRPC 1.51 also stops its listener for good after one accept4 fails with
// EMFILE, and a flood evicted as fast as it arrives makes gRPC accept and
// tear down connections faster than it lets go of them. So the
// connections to gRPC are bounded by max_connections as well, each counted
// until a second after the relay let go of its client (gRPC keeps a
// connection half-closed in its handshake until it is closed whole); a
// client past the bound waits for one, and then has the whole handshake
// deadline with gRPC.
// Each connection costs at most 3 descriptors (client, relay, gRPC's end).
// Runs on its own thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

namespace nodevol {

// The mutual-TLS server's handshake deadline (gRPC's, and the relay's).
inline constexpr std::chrono::milliseconds kTlsHandshakeTimeout{5000};

class TcpRelay {
 public:
  struct Options {
    std::string listen;        // host:port, as --tls-listen ([v6] allowed, port 0 picks one)
    std::string unix_path;     // the gRPC server's socket
    size_t max_connections = 64;
    size_t max_per_peer = 0;  // 0: half of max_connections
    std::chrono::milliseconds handshake_timeout = kTlsHandshakeTimeout;
  };

  TcpRelay();
  ~TcpRelay();  // Stops.
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;

  // Binds and starts relaying. UNAVAILABLE naming the address when the bind
  // fails, INVALID_ARGUMENT when it is malformed.
  Status Start(const Options& options);
  int port() const;
  // Connections relayed now; closed at accept because every slot is held
  // by authenticated clients; strangers closed to make room.
  size_t active() const;
  uint64_t refused() const;
  uint64_t evicted() const;
  // Closes the port and every relayed connection. Idempotent.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nodevol
