// HttpServer: serves a fixed table of GET paths, and optionally one of POST
// paths, on one TCP address, on its own thread, with Boost.Beast. Each path
// maps to a function returning the status, body and content type; the
// query string is ignored. GET and HEAD go to the GET table, POST to the
// POST table with the request body; a path in neither table gets 404, a
// method the path does not take 405 with Allow; a handler that throws
// gets 500. HEAD announces the length a GET would have and sends no body.
// Only a POST to a POST path has its body read: at most max_body bytes
// (413 from the announced length, before the body is read, and the
// connection closed); any other request is answered from its header, and
// a body it came with is never read (the connection is closed after the
// answer). TLS and client certificates with EnableTls.
//
// Connections are taken through net::Acceptor (net/acceptor.h), whose
// rules decide whom to keep when strangers flood the port: a newcomer takes
// the place of the oldest connection that has not authenticated (finished
// the TLS handshake, or on a plain server sent its first request header
// within the handshake deadline), never that of an authenticated client;
// one address holds at most max_per_peer. Where anyone can authenticate
// (plain HTTP, or TLS without a client CA) an idle connection also gives
// way to a newcomer (evict_idle is set for it). Authenticated keep-alive
// connections are kept for idle_timeout (120 s by default: longer than the
// 90 s after which Go's HTTP clients, kube-scheduler's among them, drop an
// idle connection themselves). A request's body and answer must each move
// within 10 s.
//
// Handlers run on a pool of handler_threads threads (1 by default, so one
// at a time), never on the thread that accepts and does I/O: a slow handler
// delays answers, not accepts, handshakes or the eviction of strangers.
// They must be safe to call concurrently with the rest of the program (and
// with each other when handler_threads > 1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "net/admission.h"

namespace nodevol::httpd {

// Prometheus text exposition format 0.0.4.
inline constexpr char kPrometheusContentType[] = "text/plain; version=0.0.4; charset=utf-8";
inline constexpr char kTextContentType[] = "text/plain; charset=utf-8";

struct Response {
  int status = 200;
  std::string body;
  std::string content_type = kTextContentType;
};

using Handler = std::function<Response()>;
using Handlers = std::map<std::string, Handler, std::less<>>;  // exact path ("/metrics") -> handler
using PostHandler = std::function<Response(const std::string& body)>;
using PostHandlers = std::map<std::string, PostHandler, std::less<>>;

// INVALID_ARGUMENT, as Start would give, when address is not host:port.
Status CheckAddress(const std::string& what, const std::string& address);

struct Limits {
  // The constructor's max_connections until SetLimits; idle_timeout is
  // 120 s here (net::AdmissionLimits' 0 would keep idle clients for ever).
  net::AdmissionLimits admission = [] {
    net::AdmissionLimits a;
    a.idle_timeout = std::chrono::seconds(120);
    return a;
  }();
  size_t handler_threads = 1;
};

// PEM files: the server's certificate chain and key; client_ca "" = any
// client (no client certificate asked for). With a client CA,
// client_names pins whom it lets in (pki/client_identity.h: clientAuth,
// and a CN or DNS name among them; empty = anyone the CA signed for): a
// handshake with any other certificate is closed before a request is read.
struct TlsFiles {
  std::string cert, key, client_ca;
  std::vector<std::string> client_names = {};
};

class HttpServer {
 public:
  // `what` names the address in errors and logs ("metrics" gives
  // "invalid metrics address ...", "metrics: accept failed ...").
  HttpServer(Handlers handlers, std::string what, size_t max_connections = 64);
  // With POST paths too; bodies of at most max_body bytes.
  HttpServer(Handlers handlers, PostHandlers post, size_t max_body, std::string what, size_t max_connections = 64);
  ~HttpServer();  // Stops.
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Connection limits and handler threads from the next Start (before
  // Start only; FAILED_PRECONDITION after).
  Status SetLimits(const Limits& limits);
  // Serves TLS from the next Start; INVALID_ARGUMENT naming the file that
  // cannot be read or does not match. Before Start only.
  Status EnableTls(const TlsFiles& files);
  // Binds "host:port" (IPv4, or [IPv6]:port; port 0 picks a free one) and
  // starts serving. INVALID_ARGUMENT for a malformed address, UNAVAILABLE when
  // the bind fails (e.g. address in use), with the address named.
  Status Start(const std::string& address);
  // Port actually bound (useful with port 0).
  int port() const;
  // Clients connected now; newcomers refused, and strangers closed to make
  // room or at the handshake deadline, since Start.
  size_t connections() const;
  uint64_t refused() const;
  uint64_t evicted() const;
  uint64_t expired() const;
  // Stops accepting and joins the thread. Idempotent; Start may follow.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nodevol::httpd
