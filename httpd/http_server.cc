#include "httpd/http_server.h"

#include <atomic>
#include <charconv>
#include <chrono>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <spdlog/spdlog.h>

#include "net/acceptor.h"
#include "pki/client_identity.h"

namespace nodevol::httpd {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

// A request's body, or an answer, that does not move for this long: the
// client is gone or hostile, and dropping it frees its socket.
constexpr auto kIoTimeout = std::chrono::seconds(10);

Status ParseAddress(const std::string& what, const std::string& address, tcp::endpoint* ep) {
  auto invalid = [&] {
    return Status::InvalidArgument("invalid " + what + " address \"" + address +
                                   "\": want IPv4:port or [IPv6]:port");
  };
  std::string_view host, port;
  bool bracketed = !address.empty() && address.front() == '[';
  if (bracketed) {
    size_t close = address.find("]:");
    if (close == std::string::npos) return invalid();
    host = std::string_view(address).substr(1, close - 1);
    port = std::string_view(address).substr(close + 2);
  } else {
    size_t colon = address.rfind(':');
    if (colon == std::string::npos) return invalid();
    host = std::string_view(address).substr(0, colon);
    port = std::string_view(address).substr(colon + 1);
  }
  unsigned port_num = 0;
  auto [end, perr] = std::from_chars(port.data(), port.data() + port.size(), port_num);
  if (port.empty() || perr != std::errc() || end != port.data() + port.size() || port_num > 65535)
    return invalid();
  boost::system::error_code ec;
  asio::ip::address ip = asio::ip::make_address(std::string(host), ec);
  // Brackets if and only if IPv6, so "::1:80" cannot be read two ways.
  if (ec || ip.is_v6() != bracketed) return invalid();
  *ep = tcp::endpoint(ip, static_cast<unsigned short>(port_num));
  return Status::Ok();
}

// Whom a TLS server with a client CA lets in (TlsFiles::client_names).
struct Clients {
  std::vector<std::string> names;
  std::atomic<uint64_t> refused{0};
};

struct Tables {
  Handlers get;
  PostHandlers post;
  size_t max_body = 0;
};

std::string AllowFor(const Tables& t, std::string_view path) {
  std::string allow;
  if (t.get.count(path)) allow = "GET, HEAD";
  if (t.post.count(path)) allow += allow.empty() ? "POST" : ", POST";
  return allow;
}

http::response<http::string_body> Respond(const http::request<http::string_body>& req, const Tables& tables,
                                          const std::string& what) {
  http::response<http::string_body> res;
  res.version(req.version());
  res.keep_alive(req.keep_alive());
  Response out;
  std::string_view target(req.target().data(), req.target().size());
  target = target.substr(0, target.find('?'));  // scrapers may add parameters

  const bool get = req.method() == http::verb::get || req.method() == http::verb::head;
  const bool post = req.method() == http::verb::post;
  auto g = get ? tables.get.find(target) : tables.get.end();
  auto p = post ? tables.post.find(target) : tables.post.end();
  if (g == tables.get.end() && p == tables.post.end()) {
    std::string allow = AllowFor(tables, target);
    if (allow.empty()) {
      out.status = 404;
      out.body = "not found\n";
    } else {
      out.status = 405;
      res.set(http::field::allow, allow);
      out.body = "method not allowed\n";
    }
  } else {
    try {
      out = g != tables.get.end() ? g->second() : p->second(req.body());
    } catch (const std::exception& e) {
      // E.g. bad_alloc while rendering: this request fails, the server stays.
      spdlog::error("{}: handler for {} failed: {}", what, target, e.what());
      out = Response{500, "internal error\n", kTextContentType};
    }
  }
  res.result(static_cast<unsigned>(out.status));
  res.set(http::field::content_type, out.content_type);
  // HEAD announces the length a GET would have but sends no body.
  res.content_length(out.body.size());
  if (req.method() != http::verb::head) res.body() = std::move(out.body);
  return res;
}

// One client connection; requests on it are served in order (keep-alive).
// Owned by the handlers in flight, so it dies with its last operation or
// with the io_context on Stop(). Stream: beast::tcp_stream, or
// beast::ssl_stream over one (Handshake first). Its Ticket tells the
// acceptor how far it has come: kNew until the handshake (TLS) or the
// first header (plain), kBusy from a header to its answer, kIdle between
// requests; the acceptor closes it (Close) to make room or at a deadline.
template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(Stream stream, const Tables* tables, const std::string* what, asio::thread_pool* handlers,
          Clients* clients, std::shared_ptr<net::Ticket> ticket)
      : stream_(std::move(stream)),
        tables_(tables),
        what_(what),
        handlers_(handlers),
        clients_(clients),
        ticket_(std::move(ticket)) {}

  void Start(bool tls) {
    ticket_->OnClose([weak = this->weak_from_this()] {
      if (auto self = weak.lock()) self->Close();
    });
    tls ? Handshake() : Read();
  }

 private:
  // No timer of its own: the acceptor's handshake deadline covers it.
  void Handshake() {
    if constexpr (!std::is_same_v<Stream, beast::tcp_stream>) {
      stream_.async_handshake(asio::ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
        if (ec) return self->Close();  // not TLS, no or a wrong client certificate
        if (!self->Admitted()) return self->Close();
        self->ticket_->Idle();
        self->Read();
      });
    }
  }

  // A certificate the CA signed for someone this server does not serve.
  bool Admitted() {
    if constexpr (!std::is_same_v<Stream, beast::tcp_stream>) {
      if (clients_->names.empty()) return true;
      X509* peer = SSL_get1_peer_certificate(stream_.native_handle());
      std::string who;
      Status st = pki::CheckClientIdentity(peer, clients_->names, &who);
      X509_free(peer);
      if (st.ok()) return true;
      if (clients_->refused++ % 1000 == 0)
        spdlog::warn("{}: refused a client from {}: {} ({} so far)", *what_, ticket_->peer(), st.message(),
                     clients_->refused.load());
      return false;
    }
    return true;
  }

  // Waiting for a header is the acceptor's to bound (the handshake
  // deadline before the first, idle_timeout after); a header that has
  // begun arriving is still waited for that way.
  void Read() {
    parser_.emplace();
    // No limit while the header is read (Beast would check an announced
    // length against its 1 MiB default there); OnHeader sets the real one.
    // Not boost::none: Boost 1.74's parser compares the length with the
    // optional itself, and any length is "greater" than none.
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    Lowest().expires_never();
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](beast::error_code ec, size_t) {
                              self->OnHeader(ec);
                            });
  }

  // The header decides whether the body is read at all: only a POST to a
  // POST path takes one (at most max_body bytes); any other request is
  // answered from its header, and a body it came with is not read (the
  // connection is closed after the answer).
  void OnHeader(beast::error_code ec) {
    if (ec) return Close();
    ticket_->Busy();
    Lowest().expires_after(kIoTimeout);
    const auto& h = parser_->get();
    std::string_view target(h.target().data(), h.target().size());
    target = target.substr(0, target.find('?'));
    if (h.method() == http::verb::post && tables_->post.count(target)) {
      auto announced = parser_->content_length();
      if (announced && *announced > tables_->max_body) return TooLarge();
      parser_->body_limit(tables_->max_body);  // also bounds a chunked body as it arrives
      http::async_read(stream_, buffer_, *parser_, [self = this->shared_from_this()](beast::error_code ec, size_t) {
        self->OnRead(ec);
      });
      return;
    }
    const bool unread_body = !parser_->is_done();
    req_ = {};
    req_.method(h.method());
    req_.target(h.target());
    req_.version(h.version());
    req_.keep_alive(h.keep_alive() && !unread_body);
    Answer();
  }

  void OnRead(beast::error_code ec) {
    if (ec == http::error::body_limit) return TooLarge();
    if (ec) return Close();  // EOF, timeout or a malformed request: just drop it
    req_ = parser_->release();
    Answer();
  }

  // 413, said before the body is read whole; the rest is not read.
  void TooLarge() {
    res_ = {};
    res_.result(http::status::payload_too_large);
    res_.set(http::field::content_type, kTextContentType);
    res_.set(http::field::connection, "close");
    res_.body() = "request body larger than " + std::to_string(tables_->max_body) + " bytes\n";
    res_.prepare_payload();
    Lowest().expires_after(kIoTimeout);
    http::async_write(stream_, res_, [self = this->shared_from_this()](beast::error_code, size_t) { self->Close(); });
  }

  // The handler runs on the pool; the answer is written from the I/O
  // thread. req_ is not touched by anyone else meanwhile.
  void Answer() {
    asio::post(*handlers_, [self = this->shared_from_this()] {
      auto res = Respond(self->req_, *self->tables_, *self->what_);
      auto exec = self->Lowest().socket().get_executor();
      asio::post(exec, [self, res = std::move(res)]() mutable {
        self->res_ = std::move(res);
        self->Lowest().expires_after(kIoTimeout);
        http::async_write(self->stream_, self->res_, [self](beast::error_code wec, size_t) {
          if (wec || self->res_.need_eof()) return self->Close();
          self->ticket_->Idle();
          self->Read();
        });
      });
    });
  }

  // Without TLS's close_notify: every answer carries its length, so a
  // truncation cannot pass for a whole answer, and a client that never
  // answers a shutdown cannot hold the session.
  void Close() {
    beast::error_code ignored;
    Lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
    Lowest().close();
  }

  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> req_;
  http::response<http::string_body> res_;
  const Tables* tables_;
  const std::string* what_;
  asio::thread_pool* handlers_;
  Clients* clients_;
  std::shared_ptr<net::Ticket> ticket_;
};

}  // namespace

Status CheckAddress(const std::string& what, const std::string& address) {
  tcp::endpoint ep;
  return ParseAddress(what, address, &ep);
}

struct HttpServer::Impl {
  Tables tables;
  std::string what;
  std::mutex mu;  // serializes SetLimits/EnableTls/Start/Stop
  Limits limits;
  // Reset on Stop(): the pool first (its handlers post to the io_context),
  // the acceptor before the io_context, since it uses its services.
  std::unique_ptr<asio::io_context> ioc;
  std::unique_ptr<asio::thread_pool> handlers;
  std::unique_ptr<net::Acceptor> acceptor;
  std::thread thread;
  int port = 0;
  std::unique_ptr<asio::ssl::context> tls;  // null: plain HTTP
  bool client_certs = false;                // tls asks for client certificates
  Clients clients;

  void OnAccept(tcp::socket socket, std::shared_ptr<net::Ticket> ticket) {
    // A response larger than one segment goes out in several writes
    // (TLS records, header then body): with Nagle the last waits for
    // the client's delayed ACK, 40 ms a request (extender_bench at
    // 1000 nodes over TLS: 48 ms p50 against 4.4 ms in plain HTTP).
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    beast::tcp_stream stream(std::move(socket));
    if (tls)
      std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(
          beast::ssl_stream<beast::tcp_stream>(std::move(stream), *tls), &tables, &what, handlers.get(), &clients,
          std::move(ticket))
          ->Start(true);
    else
      std::make_shared<Session<beast::tcp_stream>>(std::move(stream), &tables, &what, handlers.get(), &clients,
                                                   std::move(ticket))
          ->Start(false);
  }
};

HttpServer::HttpServer(Handlers handlers, std::string what, size_t max_connections)
    : HttpServer(std::move(handlers), {}, 0, std::move(what), max_connections) {}

HttpServer::HttpServer(Handlers handlers, PostHandlers post, size_t max_body, std::string what,
                       size_t max_connections)
    : impl_(std::make_unique<Impl>()) {
  impl_->tables = {std::move(handlers), std::move(post), max_body};
  impl_->what = std::move(what);
  impl_->limits.admission.max_connections = max_connections;
}

Status HttpServer::SetLimits(const Limits& limits) {
  std::lock_guard lock(impl_->mu);
  if (impl_->ioc) return Status::FailedPrecondition(impl_->what + " server already started");
  impl_->limits = limits;
  impl_->limits.handler_threads = std::max<size_t>(1, limits.handler_threads);
  return Status::Ok();
}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::EnableTls(const TlsFiles& files) {
  std::lock_guard lock(impl_->mu);
  if (impl_->ioc) return Status::FailedPrecondition(impl_->what + " server already started");
  auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1 |
                   asio::ssl::context::single_dh_use);
  auto load = [&](const char* what_file, const std::string& path, auto&& fn) -> Status {
    beast::error_code ec;
    fn(path, ec);
    if (ec)
      return Status::InvalidArgument(impl_->what + " TLS " + what_file + " \"" + path + "\": " + ec.message());
    return Status::Ok();
  };
  NODEVOL_RETURN_IF_ERROR(load("certificate", files.cert, [&](const std::string& p, beast::error_code& ec) {
    ctx->use_certificate_chain_file(p, ec);
  }));
  NODEVOL_RETURN_IF_ERROR(load("key", files.key, [&](const std::string& p, beast::error_code& ec) {
    ctx->use_private_key_file(p, asio::ssl::context::pem, ec);
  }));
  if (!files.client_ca.empty()) {
    NODEVOL_RETURN_IF_ERROR(load("client CA", files.client_ca, [&](const std::string& p, beast::error_code& ec) {
      ctx->load_verify_file(p, ec);
    }));
    ctx->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
  }
  impl_->client_certs = !files.client_ca.empty();
  impl_->clients.names = impl_->client_certs ? files.client_names : std::vector<std::string>{};
  impl_->tls = std::move(ctx);
  return Status::Ok();
}

Status HttpServer::Start(const std::string& address) {
  std::lock_guard lock(impl_->mu);
  if (impl_->ioc) return Status::FailedPrecondition(impl_->what + " server already started");
  tcp::endpoint ep;
  NODEVOL_RETURN_IF_ERROR(ParseAddress(impl_->what, address, &ep));

  auto ioc = std::make_unique<asio::io_context>(1);
  net::AcceptorOptions ao;
  ao.what = impl_->what;
  ao.limits = impl_->limits.admission;
  // Where anyone can authenticate, being authenticated earns no place.
  ao.limits.evict_idle = !(impl_->tls && impl_->client_certs);
  auto acceptor = std::make_unique<net::Acceptor>(
      *ioc, ao, [impl = impl_.get()](tcp::socket s, std::shared_ptr<net::Ticket> t) {
        impl->OnAccept(std::move(s), std::move(t));
      });
  impl_->handlers = std::make_unique<asio::thread_pool>(impl_->limits.handler_threads);
  if (Status ls = acceptor->Listen(ep); !ls.ok()) {
    impl_->handlers.reset();
    return Status::Unavailable("cannot listen on " + impl_->what + " address \"" + address + "\": " + ls.message());
  }
  impl_->port = acceptor->port();
  impl_->ioc = std::move(ioc);
  impl_->acceptor = std::move(acceptor);
  impl_->thread = std::thread([ioc = impl_->ioc.get(), what = impl_->what] {
    // A handler throwing (say bad_alloc while rendering) must not take the
    // daemon down; log it and keep serving.
    for (;;) {
      try {
        ioc->run();
        return;
      } catch (const std::exception& e) {
        spdlog::error("{}: server handler failed: {}", what, e.what());
      }
    }
  });
  return Status::Ok();
}

int HttpServer::port() const { return impl_->port; }
size_t HttpServer::connections() const { return impl_->acceptor ? impl_->acceptor->active() : 0; }
uint64_t HttpServer::refused() const { return impl_->acceptor ? impl_->acceptor->refused() : 0; }
uint64_t HttpServer::evicted() const { return impl_->acceptor ? impl_->acceptor->evicted() : 0; }
uint64_t HttpServer::expired() const { return impl_->acceptor ? impl_->acceptor->expired() : 0; }

void HttpServer::Stop() {
  std::lock_guard lock(impl_->mu);
  if (!impl_->ioc) return;
  // stop() makes run() return even with reads pending on idle clients; their
  // sockets are closed when the io_context destroys the pending handlers.
  impl_->ioc->stop();
  impl_->thread.join();
  // A handler still running finishes and posts its answer to the stopped
  // io_context, which drops it with the session.
  impl_->handlers->stop();
  impl_->handlers->join();
  impl_->handlers.reset();
  impl_->acceptor.reset();
  impl_->ioc.reset();
}

}  // namespace nodevol::httpd
