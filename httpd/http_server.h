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
// answer). No TLS, no authentication.
//
// At most max_connections clients are served at once; one more is closed
// right after accept, and a client silent for 10 s is dropped, so a flood
// of idle connections holds a bounded number of descriptors (issue 25: it
// used to take them all, and with them nodevold's gRPC listeners). A failed
// accept (EMFILE) is retried after 100 ms, never the end of the listener.
//
// Handlers run on the server's single thread, one at a time, and must be
// safe to call concurrently with the rest of the program.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "base/status.h"

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

// PEM files: the server's certificate chain and key; client_ca "" = any
// client (no client certificate asked for).
struct TlsFiles {
  std::string cert, key, client_ca;
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

  // Serves TLS from the next Start; INVALID_ARGUMENT naming the file that
  // cannot be read or does not match. Before Start only.
  Status EnableTls(const TlsFiles& files);
  // Binds "host:port" (IPv4, or [IPv6]:port; port 0 picks a free one) and
  // starts serving. INVALID_ARGUMENT for a malformed address, UNAVAILABLE when
  // the bind fails (e.g. address in use), with the address named.
  Status Start(const std::string& address);
  // Port actually bound (useful with port 0).
  int port() const;
  // Clients connected now.
  size_t connections() const;
  // Stops accepting and joins the thread. Idempotent; Start may follow.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nodevol::httpd
