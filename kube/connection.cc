#include "kube/connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <algorithm>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include "base/host_port.h"

namespace nodevol::kube {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using Outcome = Connection::Outcome;
using Clock = Exchange::Clock;

// What a read step reads into when the body is passed on piece by piece.
constexpr size_t kReadChunk = 64 * 1024;

}  // namespace

bool ReadWholeFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  *out = s.str();
  return true;
}

Status EndpointOf(const Config& config, Endpoint* e, std::string* prefix) {
  const std::string& url = config.server;
  size_t s = url.find("://");
  std::string scheme = s == std::string::npos ? "" : url.substr(0, s);
  if (scheme != "https" && scheme != "http")
    return Status::InvalidArgument("apiserver URL \"" + url + "\" is not an http(s) URL");
  std::string rest = url.substr(s + 3);
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  *prefix = slash == std::string::npos ? "" : rest.substr(slash);
  while (!prefix->empty() && prefix->back() == '/') prefix->pop_back();
  size_t colon = authority.rfind(':');
  size_t bracket = authority.rfind(']');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
    e->host = authority.substr(0, colon);
    e->port = authority.substr(colon + 1);
  } else {
    e->host = authority;
    e->port = scheme == "https" ? "443" : "80";
  }
  if (e->host.size() > 2 && e->host.front() == '[' && e->host.back() == ']') e->host = e->host.substr(1, e->host.size() - 2);
  if (e->host.empty() || e->port.empty())
    return Status::InvalidArgument("apiserver URL \"" + url + "\" names no host");
  e->tls = scheme == "https";
  e->server_name = config.tls_server_name.empty() ? e->host : config.tls_server_name;
  return Status::Ok();
}

struct TlsContext::Impl {
  ssl::context ctx{ssl::context::tls_client};
  bool verify = true;
};

TlsContext::TlsContext() : impl_(new Impl) {}
TlsContext::~TlsContext() = default;

Status TlsContext::Make(const Config& c, std::shared_ptr<TlsContext>* out) {
  std::shared_ptr<TlsContext> t(new TlsContext());
  ssl::context& ctx = t->impl_->ctx;
  boost::system::error_code ec;
  ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                  ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  if (c.insecure_skip_tls_verify) {
    ctx.set_verify_mode(ssl::verify_none);
    t->impl_->verify = false;
  } else {
    ctx.set_verify_mode(ssl::verify_peer);
    std::string ca = c.ca_data;
    if (ca.empty() && !c.ca_file.empty() && !ReadWholeFile(c.ca_file, &ca))
      return Status::Unavailable("cannot read the apiserver's CA file " + c.ca_file);
    if (!ca.empty()) {
      ctx.add_certificate_authority(asio::buffer(ca), ec);
    } else {
      ctx.set_default_verify_paths(ec);
    }
    if (ec) return Status::InvalidArgument("the apiserver's CA: " + ec.message());
  }
  std::string cert = c.client_cert_data, key = c.client_key_data;
  if (cert.empty() && !c.client_cert_file.empty() && !ReadWholeFile(c.client_cert_file, &cert))
    return Status::Unavailable("cannot read the client certificate file " + c.client_cert_file);
  if (key.empty() && !c.client_key_file.empty() && !ReadWholeFile(c.client_key_file, &key))
    return Status::Unavailable("cannot read the client key file " + c.client_key_file);
  if (!cert.empty()) {
    ctx.use_certificate_chain(asio::buffer(cert), ec);
    if (!ec) ctx.use_private_key(asio::buffer(key), ssl::context::pem, ec);
    if (ec) return Status::InvalidArgument("the client certificate or its key: " + ec.message());
  }
  *out = std::move(t);
  return Status::Ok();
}

namespace {

// One asynchronous step, run to completion on io: `start(handler)` begins
// it. Past the deadline, or once *cancel is true, `abort` makes the
// operation complete (with operation_aborted) and the step reports
// kTimedOut or kCancelled. kOk: the operation completed, *ec its result.
template <class Start, class Abort>
Outcome RunStep(asio::io_context& io, Start&& start, Abort&& abort, Clock::time_point deadline,
                const std::atomic<bool>* cancel, beast::error_code* ec) {
  bool done = false;
  start([ec, &done](beast::error_code e, auto&&...) {
    *ec = e;
    done = true;
  });
  Outcome outcome = Outcome::kOk;
  while (!done) {
    auto now = Clock::now();
    if (outcome == Outcome::kOk && (now >= deadline || (cancel != nullptr && cancel->load()))) {
      outcome = now >= deadline ? Outcome::kTimedOut : Outcome::kCancelled;
      abort();
    }
    io.restart();
    if (outcome != Outcome::kOk) {
      io.run();
    } else {
      io.run_for(std::min<Clock::duration>(deadline - now, std::chrono::seconds(1)));
    }
  }
  return outcome;
}

// The addresses of host: an IP literal as it is; a name resolved on an
// io_context of its own, whose resolver thread ends with it (one kept per
// pooled connection would be a thread each).
Outcome Resolve(const std::string& host, const std::string& port, Clock::time_point deadline,
                tcp::resolver::results_type* out, beast::error_code* ec) {
  boost::system::error_code not_ip;
  asio::ip::address ip = asio::ip::make_address(host, not_ip);
  unsigned long port_number = std::strtoul(port.c_str(), nullptr, 10);
  if (!not_ip && port_number > 0 && port_number < 65536) {
    *out = tcp::resolver::results_type::create(tcp::endpoint(ip, static_cast<unsigned short>(port_number)), host, port);
    return Outcome::kOk;
  }
  asio::io_context io{1};
  tcp::resolver resolver(io);
  return RunStep(
      io,
      [&](auto h) {
        resolver.async_resolve(host, port, [out, h](beast::error_code err, tcp::resolver::results_type r) mutable {
          *out = std::move(r);
          h(err);
        });
      },
      [&] { resolver.cancel(); }, deadline, nullptr, ec);
}

}  // namespace

struct Connection::Impl {
  asio::io_context io{1};
  std::shared_ptr<TlsContext> tls;  // the SSL_CTX the stream uses
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure;
  beast::flat_buffer buffer;
  std::string host_header;
  bool keep_alive = false;
  std::unique_ptr<char[]> chunk{new char[kReadChunk]};

  tcp::socket& socket() { return secure ? beast::get_lowest_layer(*secure).socket() : plain->socket(); }
  void Close() {
    boost::system::error_code ignored;
    socket().close(ignored);
    keep_alive = false;
  }

  template <class Start>
  Outcome SocketStep(Start&& start, Clock::time_point deadline, const std::atomic<bool>* cancel,
                     beast::error_code* ec) {
    return RunStep(io, std::forward<Start>(start), [this] { Close(); }, deadline, cancel, ec);
  }
  template <class F>
  auto With(F&& f) {
    if (secure) return f(*secure);
    return f(*plain);
  }
};

Connection::Connection(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Connection::~Connection() = default;

Outcome Connection::Open(const Endpoint& e, std::shared_ptr<TlsContext> tls, Clock::time_point deadline,
                         std::unique_ptr<Connection>* out, std::string* error) {
  auto impl = std::make_unique<Impl>();
  Impl& c = *impl;
  const std::string where = JoinHostPort(e.host, e.port);
  beast::error_code ec;
  tcp::resolver::results_type endpoints;
  Outcome o = Resolve(e.host, e.port, deadline, &endpoints, &ec);
  if (o != Outcome::kOk || ec) {
    *error = "resolve " + e.host + ": " + (o == Outcome::kTimedOut ? "timed out" : ec.message());
    return o == Outcome::kOk ? Outcome::kFailed : o;
  }
  if (e.tls) {
    c.tls = std::move(tls);
    c.secure.emplace(c.io, c.tls->impl()->ctx);
    boost::system::error_code not_ip;
    asio::ip::make_address(e.server_name, not_ip);
    if (not_ip && !SSL_set_tlsext_host_name(c.secure->native_handle(), e.server_name.c_str())) {
      *error = "TLS with " + where + ": cannot set the server name " + e.server_name;
      return Outcome::kFailed;
    }
    if (c.tls->impl()->verify) c.secure->set_verify_callback(ssl::host_name_verification(e.server_name));
  } else {
    c.plain.emplace(c.io);
  }
  o = c.SocketStep([&](auto h) { c.With([&](auto& s) { beast::get_lowest_layer(s).async_connect(endpoints, h); }); },
                   deadline, nullptr, &ec);
  if (o != Outcome::kOk || ec) {
    *error = "connect to " + where + ": " + (o == Outcome::kTimedOut ? "timed out" : ec.message());
    return o == Outcome::kOk ? Outcome::kFailed : o;
  }
  // Requests are small and answered at once: no Nagle delay. Keepalive
  // probes find a connection whose peer vanished (a watch waits minutes).
  boost::system::error_code ignored;
  c.socket().set_option(tcp::no_delay(true), ignored);
  c.socket().set_option(asio::socket_base::keep_alive(true), ignored);
  int idle = 30, interval = 15;
  ::setsockopt(c.socket().native_handle(), IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(c.socket().native_handle(), IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  if (e.tls) {
    o = c.SocketStep([&](auto h) { c.secure->async_handshake(ssl::stream_base::client, h); }, deadline, nullptr, &ec);
    if (o != Outcome::kOk || ec) {
      *error = "TLS handshake with " + where + ": " + (o == Outcome::kTimedOut ? "timed out" : ec.message());
      return o == Outcome::kOk ? Outcome::kFailed : o;
    }
  }
  c.host_header = where;
  c.keep_alive = true;
  out->reset(new Connection(std::move(impl)));
  return Outcome::kOk;
}

Outcome Connection::Do(Exchange& x, std::string* error) {
  Impl& c = *impl_;
  c.keep_alive = false;  // until an answer is read whole
  http::request<http::string_body> req;
  req.method_string(x.method);
  req.target(x.target);
  req.version(11);
  req.set(http::field::host, c.host_header);
  for (const auto& [name, value] : x.headers) req.set(name, value);
  if (x.body != nullptr) req.body() = *x.body;
  req.prepare_payload();

  auto fail = [&](Outcome o, const beast::error_code& ec, const char* step) {
    c.Close();
    if (o == Outcome::kOk) o = Outcome::kFailed;
    *error = std::string(step) + ": " + (o == Outcome::kTimedOut ? "timed out" : o == Outcome::kCancelled ? "cancelled" : ec.message());
    return o;
  };
  beast::error_code ec;
  Outcome o = c.SocketStep([&](auto h) { c.With([&](auto& s) { http::async_write(s, req, h); }); }, x.deadline,
                           x.cancel, &ec);
  if (o != Outcome::kOk || ec) return fail(o, ec, "send");

  http::response_parser<http::buffer_body> p;
  p.body_limit(std::numeric_limits<std::uint64_t>::max());  // a list of 50,000 objects is large
  p.header_limit(64 * 1024);
  o = c.SocketStep([&](auto h) { c.With([&](auto& s) { http::async_read_header(s, c.buffer, p, h); }); },
                   x.deadline, x.cancel, &ec);
  x.answered = p.got_some();
  if (o != Outcome::kOk || ec) return fail(o, ec, "read the answer");
  x.status = static_cast<int>(p.get().result_int());
  if (auto it = p.get().find(http::field::retry_after); it != p.get().end()) {
    std::string v(it->value());
    char* end = nullptr;
    long secs = std::strtol(v.c_str(), &end, 10);
    if (end != v.c_str() && *end == '\0' && secs >= 0) x.retry_after = secs;
  }
  const bool stream = x.on_data != nullptr && x.status >= 200 && x.status < 300;
  while (!p.is_done()) {
    p.get().body().data = c.chunk.get();
    p.get().body().size = kReadChunk;
    o = c.SocketStep([&](auto h) { c.With([&](auto& s) { http::async_read_some(s, c.buffer, p, h); }); },
                     x.deadline, x.cancel, &ec);
    if (ec == http::error::need_buffer) ec = {};
    if (o != Outcome::kOk || ec) return fail(o, ec, "read the answer");
    size_t n = kReadChunk - p.get().body().size;
    if (n == 0) continue;
    std::string_view piece(c.chunk.get(), n);
    if (stream) {
      if (!(*x.on_data)(piece)) {
        x.stopped = true;
        c.Close();
        return Outcome::kOk;
      }
    } else if (x.on_data == nullptr || x.response.size() + n <= x.max_error_body) {
      x.response.append(piece);
    }
  }
  c.keep_alive = p.keep_alive();
  return Outcome::kOk;
}

bool Connection::Reusable() const {
  Impl& c = *impl_;
  if (!c.keep_alive || !c.socket().is_open() || c.buffer.size() != 0) return false;
  // Readable while idle: the server closed it (EOF) or sent what no
  // request asked for. Either way it carries nothing more.
  pollfd pfd{c.socket().native_handle(), POLLIN, 0};
  return ::poll(&pfd, 1, 0) == 0;
}

}  // namespace nodevol::kube
