#include "server/tcp_relay.h"

#include <array>
#include <atomic>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <spdlog/spdlog.h>

#include "base/parse.h"

namespace nodevol {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using local = asio::local::stream_protocol;
using error_code = boost::system::error_code;

// host:port as config.cc checked it; [v6] in brackets.
Status Endpoint(const std::string& address, tcp::endpoint* ep) {
  size_t colon = address.rfind(':');
  auto bad = [&] { return Status::InvalidArgument("--tls-listen \"" + address + "\" is not host:port"); };
  if (colon == std::string::npos || colon == 0) return bad();
  std::string host = address.substr(0, colon);
  if (host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  uint64_t port = 0;
  if (!ParseUint("port", address.substr(colon + 1), 65535, &port).ok()) return bad();
  error_code ec;
  asio::ip::address ip = asio::ip::make_address(host, ec);
  if (ec) {
    // A name (e.g. localhost): the first address it resolves to.
    asio::io_context ioc;
    tcp::resolver r(ioc);
    auto results = r.resolve(host, std::to_string(port), ec);
    if (ec || results.empty())
      return Status::InvalidArgument("--tls-listen \"" + address + "\": cannot resolve " + host);
    *ep = results.begin()->endpoint();
    return Status::Ok();
  }
  *ep = tcp::endpoint(ip, static_cast<unsigned short>(port));
  return Status::Ok();
}

// One client connection and its twin to the gRPC server. Owned by its
// pending operations: it goes when both directions have stopped.
class Conn : public std::enable_shared_from_this<Conn> {
 public:
  Conn(tcp::socket client, local::socket server, std::atomic<size_t>* active)
      : client_(std::move(client)), server_(std::move(server)), timer_(client_.get_executor()), active_(active) {}
  ~Conn() { --*active_; }

  void Start(std::chrono::milliseconds first_byte_timeout) {
    timer_.expires_after(first_byte_timeout);
    timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec && !self->got_first_byte_) self->Close();
    });
    Pump(client_, server_, up_, true);
    Pump(server_, client_, down_, false);
  }

 private:
  using Buffer = std::array<char, 16384>;

  template <class From, class To>
  void Pump(From& from, To& to, Buffer& buf, bool from_client) {
    from.async_read_some(asio::buffer(buf), [self = shared_from_this(), &from, &to, &buf, from_client](error_code ec,
                                                                                                       size_t n) {
      if (ec) return self->Close();
      if (from_client && !self->got_first_byte_) {
        self->got_first_byte_ = true;
        self->timer_.cancel();
      }
      asio::async_write(to, asio::buffer(buf.data(), n), [self, &from, &to, &buf, from_client](error_code ec, size_t) {
        if (ec) return self->Close();
        self->Pump(from, to, buf, from_client);
      });
    });
  }

  // Either side gone: both go (TLS and HTTP/2 never half-close).
  void Close() {
    error_code ignored;
    client_.close(ignored);
    server_.close(ignored);
    timer_.cancel();
  }

  tcp::socket client_;
  local::socket server_;
  asio::steady_timer timer_;
  std::atomic<size_t>* active_;
  bool got_first_byte_ = false;
  Buffer up_, down_;
};

}  // namespace

struct TcpRelay::Impl {
  Options options;
  std::unique_ptr<asio::io_context> ioc;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::unique_ptr<asio::steady_timer> retry;
  std::thread thread;
  int port = 0;
  std::atomic<size_t> active{0};
  std::atomic<uint64_t> refused{0};

  void Accept() {
    acceptor->async_accept([this](error_code ec, tcp::socket client) {
      if (ec == asio::error::operation_aborted) return;
      if (ec) {
        // E.g. EMFILE: back off instead of spinning, then accept again.
        spdlog::warn("tls listener: accept failed: {}", ec.message());
        retry->expires_after(std::chrono::milliseconds(100));
        retry->async_wait([this](error_code ec) {
          if (!ec) Accept();
        });
        return;
      }
      if (active.load() >= options.max_connections) {
        // Closed at once: a flood costs one descriptor for a moment, and
        // the log says so once per 1000.
        if (refused++ % 1000 == 0)
          spdlog::warn("tls listener: {} connections open, the most --max-tcp-connections allows; closing new ones "
                       "({} so far)", options.max_connections, refused.load());
        error_code ignored;
        client.close(ignored);
        return Accept();
      }
      local::socket server(*ioc);
      error_code cec;
      server.connect(local::endpoint(options.unix_path), cec);
      if (cec) {
        spdlog::error("tls listener: cannot reach the TLS server at {}: {}", options.unix_path, cec.message());
        error_code ignored;
        client.close(ignored);
        return Accept();
      }
      error_code ignored;
      client.set_option(asio::socket_base::keep_alive(true), ignored);
      client.set_option(tcp::no_delay(true), ignored);
      ++active;
      std::make_shared<Conn>(std::move(client), std::move(server), &active)->Start(options.first_byte_timeout);
      Accept();
    });
  }
};

TcpRelay::TcpRelay() : impl_(std::make_unique<Impl>()) {}
TcpRelay::~TcpRelay() { Stop(); }

Status TcpRelay::Start(const Options& options) {
  if (impl_->ioc) return Status::FailedPrecondition("tls listener already started");
  tcp::endpoint ep;
  NODEVOL_RETURN_IF_ERROR(Endpoint(options.listen, &ep));
  auto ioc = std::make_unique<asio::io_context>(1);
  auto acceptor = std::make_unique<tcp::acceptor>(*ioc);
  error_code ec;
  acceptor->open(ep.protocol(), ec);
  if (!ec) acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor->bind(ep, ec);
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (!ec) impl_->port = acceptor->local_endpoint(ec).port();
  if (ec) return Status::Unavailable("--tls-listen " + options.listen + ": cannot listen: " + ec.message());
  impl_->options = options;
  impl_->ioc = std::move(ioc);
  impl_->acceptor = std::move(acceptor);
  impl_->retry = std::make_unique<asio::steady_timer>(*impl_->ioc);
  impl_->Accept();
  impl_->thread = std::thread([ioc = impl_->ioc.get()] {
    for (;;) {
      try {
        ioc->run();
        return;
      } catch (const std::exception& e) {
        spdlog::error("tls listener: {}", e.what());
      }
    }
  });
  return Status::Ok();
}

int TcpRelay::port() const { return impl_->port; }
size_t TcpRelay::active() const { return impl_->active.load(); }
uint64_t TcpRelay::refused() const { return impl_->refused.load(); }

void TcpRelay::Stop() {
  if (!impl_->ioc) return;
  impl_->ioc->stop();
  impl_->thread.join();
  impl_->retry.reset();
  impl_->acceptor.reset();
  impl_->ioc.reset();  // destroys the pending handlers, and with them every Conn and its sockets
}

}  // namespace nodevol
