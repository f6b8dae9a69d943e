// Connection: one HTTP/1.1 connection to an apiserver, plain or TLS
// (Boost.Beast over OpenSSL), kept open between exchanges. The one
// transport of both clients: Client pools them, SimpleClient makes one a
// call. Used by one thread at a time.
//
// Every step (resolve, connect, handshake, write, each read) is bounded by
// the exchange's deadline, and a streamed answer also ends within about a
// second of *cancel becoming true: each step runs as an asynchronous
// operation on the connection's own io_context, in slices of at most a
// second, and a step past its deadline closes the socket.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "kube/config.h"

namespace nodevol::kube {

// Where to connect: host and port, and for TLS the context (CA, client
// certificate) and the name the server's certificate must carry.
struct Endpoint {
  std::string host;  // without brackets
  std::string port;
  bool tls = true;
  std::string server_name;  // for TLS: verified, and sent as SNI unless an IP
};

// The endpoint and path prefix of config.server ("https://host:port/p",
// an IPv6 host in brackets, the port defaulting to the scheme's); the
// name verified is tls-server-name when the kubeconfig gives one.
// INVALID_ARGUMENT for anything but an http(s) URL naming a host.
Status EndpointOf(const Config& config, Endpoint* endpoint, std::string* prefix);

// The whole of a file (kubeconfig credentials, a token); false if unreadable.
bool ReadWholeFile(const std::string& path, std::string* out);

// A TLS client context made from a kubeconfig's credentials. The files
// are read when it is made: make one per new connection to follow files
// rotated in place (kubelet's client certificate).
class TlsContext {
 public:
  // UNAVAILABLE when a file cannot be read, INVALID_ARGUMENT when the
  // CA, certificate or key cannot be used. The message names which.
  static Status Make(const Config& config, std::shared_ptr<TlsContext>* out);
  ~TlsContext();
  struct Impl;
  Impl* impl() const { return impl_.get(); }

 private:
  TlsContext();
  std::unique_ptr<Impl> impl_;
};

struct Exchange {
  using Clock = std::chrono::steady_clock;
  // In.
  std::string method = "GET";
  std::string target;  // path and query
  std::vector<std::pair<std::string, std::string>> headers;
  const std::string* body = nullptr;
  Clock::time_point deadline;
  // A 2xx answer's body goes here as it arrives, instead of into `body`;
  // returning false ends the exchange (and the connection).
  const std::function<bool(std::string_view)>* on_data = nullptr;
  size_t max_error_body = 64 * 1024;  // of a streamed request's non-2xx answer
  const std::atomic<bool>* cancel = nullptr;
  // Out.
  int status = 0;
  std::string response;
  long retry_after = -1;  // the Retry-After header, seconds
  bool answered = false;  // a byte of the answer arrived
  bool stopped = false;   // on_data returned false
};

class Connection {
 public:
  enum class Outcome { kOk, kTimedOut, kCancelled, kFailed };

  // Resolves, connects and (for TLS) handshakes by `deadline`. On failure
  // *error says which step failed and why.
  static Outcome Open(const Endpoint& endpoint, std::shared_ptr<TlsContext> tls,
                      Exchange::Clock::time_point deadline, std::unique_ptr<Connection>* out, std::string* error);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Sends x's request and reads the answer. kOk: an HTTP answer was read
  // whole (whatever its status), or on_data stopped it. *error otherwise.
  Outcome Do(Exchange& x, std::string* error);

  // Whether the connection may carry another exchange: the last answer was
  // whole and allowed keep-alive, and the server has not closed it since
  // (an idle connection the server has written to or closed is not reused).
  bool Reusable() const;

  struct Impl;

 private:
  explicit Connection(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace nodevol::kube
