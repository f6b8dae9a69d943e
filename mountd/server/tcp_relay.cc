#include "server/tcp_relay.h"

#include <array>
#include <deque>
#include <functional>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <spdlog/spdlog.h>

#include "base/parse.h"
#include "net/acceptor.h"

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

// The connections to gRPC's private socket, bounded: gRPC 1.51 stops its
// listener for good after one accept4 fails with EMFILE, so the relay
// must never make gRPC hold more descriptors than the budget allows. A
// connection to gRPC counts from connect until gRPC has closed its end
// (the relay shuts down its side and waits for gRPC's EOF, below), not
// until the relay drops it: a flood evicted as fast as it arrives would
// otherwise leave gRPC with a backlog of closed connections to accept and
// tear down, and it ran out of descriptors so (fd_flood_test). A client
// that would go over the bound waits for one to finish. Waiters are held
// weakly (Conn::parked_ keeps one alive until it is closed), taken in
// order, and those closed meanwhile skipped, in a loop.
class Upstreams {
 public:
  // Takes a slot and returns true, or queues `take` and returns false.
  // `take` is run when a slot is free: it returns false when its
  // connection is gone (the slot goes to the next one), true when taken.
  bool Acquire(std::weak_ptr<void> owner, std::function<bool()> take) {
    if (open_ < max_) return ++open_, true;
    if (waiting_.size() >= 4 * max_) Purge();
    waiting_.push_back({std::move(owner), std::move(take)});
    return false;
  }
  // A slot is free: to the first waiter still there, else back. Runs no
  // deeper than one level: a waiter that gives its slot back at once
  // (its connect failed) is handled by the loop, not by recursion.
  void Release() {
    if (stopping_) return;
    ++to_release_;
    if (releasing_) return;
    releasing_ = true;
    while (to_release_ > 0) {
      --to_release_;
      bool taken = false;
      while (!taken && !waiting_.empty()) {
        auto take = std::move(waiting_.front().take);
        waiting_.pop_front();
        taken = take();
      }
      if (!taken) --open_;
    }
    releasing_ = false;
  }
  // Drops the waiters (before the io_context goes); Release does nothing
  // from here on.
  void Stop() {
    stopping_ = true;
    waiting_.clear();
  }
  Upstreams(std::string path, size_t max) : path_(std::move(path)), max_(max) {}
  const std::string& path() const { return path_; }

 private:
  // Waiters whose connection is gone, out (a flood that keeps being
  // evicted while every slot is busy must not grow the queue for ever).
  void Purge() {
    std::deque<Waiter> kept;
    for (auto& w : waiting_)
      if (!w.owner.expired()) kept.push_back(std::move(w));
    waiting_.swap(kept);
  }

  struct Waiter {
    std::weak_ptr<void> owner;  // expired: the connection is gone
    std::function<bool()> take;
  };

  std::string path_;
  size_t max_;
  size_t open_ = 0, to_release_ = 0;
  bool stopping_ = false, releasing_ = false;
  std::deque<Waiter> waiting_;
};

// One client connection and its twin to the gRPC server, made once the
// client has sent its first bytes (a TLS client speaks first: a silent
// stranger never reaches gRPC). Owned by its pending operations (and, while
// it waits for a slot, by parked_): it goes when both directions have
// stopped, or when the acceptor closes it (a stranger evicted, or past the
// deadline).
class Conn : public std::enable_shared_from_this<Conn> {
 public:
  Conn(tcp::socket client, Upstreams* upstreams, std::chrono::milliseconds trust_after,
       std::shared_ptr<net::Ticket> ticket)
      : client_(std::move(client)),
        server_(client_.get_executor()),
        timer_(client_.get_executor()),
        upstreams_(upstreams),
        trust_after_(trust_after),
        ticket_(std::move(ticket)) {}
  ~Conn() {
    if (holds_upstream_) upstreams_->Release();
  }

  void Start() {
    ticket_->OnClose([weak = weak_from_this()] {
      if (auto self = weak.lock()) self->Close();
    });
    client_.async_read_some(asio::buffer(up_), [self = shared_from_this()](error_code ec, size_t n) {
      if (ec) return self->Close();
      self->first_ = n;
      auto take = [weak = std::weak_ptr<Conn>(self)] {
        auto conn = weak.lock();
        if (!conn || conn->closed_) return false;
        conn->parked_.reset();
        conn->Connect();
        return true;
      };
      if (self->upstreams_->Acquire(self, take)) return self->Connect();
      self->parked_ = self;  // kept while it waits; Close lets go
    });
  }

 private:
  using Buffer = std::array<char, 16384>;

  void Connect() {
    holds_upstream_ = true;
    // The handshake deadline starts over: a client that waited for a slot
    // gets the whole of it with gRPC.
    ticket_->Restart();
    server_.async_connect(local::endpoint(upstreams_->path()), [self = shared_from_this()](error_code ec) {
      if (self->closed_) return;
      if (ec) {
        spdlog::error("tls listener: cannot reach the TLS server at {}: {}", self->upstreams_->path(), ec.message());
        return self->Close();
      }
      self->Relay();
    });
  }

  void Relay() {
    // gRPC closes a connection that has not finished mutual TLS, with a
    // pinned client name, and sent its HTTP/2 settings by its handshake
    // deadline: one it has kept past that has authenticated, and is never
    // evicted.
    timer_.expires_after(trust_after_);
    timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec && !self->closed_) self->ticket_->Busy();
    });
    asio::async_write(server_, asio::buffer(up_.data(), first_), [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return self->Close();
      self->Pump(self->client_, self->server_, self->up_);
    });
    Pump(server_, client_, down_);
  }

  template <class From, class To>
  void Pump(From& from, To& to, Buffer& buf) {
    from.async_read_some(asio::buffer(buf), [self = shared_from_this(), &from, &to, &buf](error_code ec, size_t n) {
      if (ec) return self->Close();
      asio::async_write(to, asio::buffer(buf.data(), n), [self, &from, &to, &buf](error_code ec, size_t) {
        if (ec) return self->Close();
        self->Pump(from, to, buf);
      });
    });
  }

  // Either side gone: both go (TLS and HTTP/2 never half-close). gRPC's
  // side is shut down and read to its end for up to kDrainLimit, then
  // closed, and the slot counts until then. Measured on gRPC 1.51: a
  // connection half-closed in the middle of its TLS handshake is kept (no
  // EOF, not even at gRPC's handshake deadline) until the relay closes it
  // whole, which gRPC notices at once. So a slot is held at least
  // kDrainLimit after a stranger's eviction: connections reach gRPC at most
  // max_connections per kDrainLimit, however fast a flood is evicted, and
  // gRPC's descriptors stay bounded (an unbounded churn made it hit EMFILE
  // and stop its listener for good).
  void Close() {
    if (closed_) return;
    closed_ = true;
    parked_.reset();
    error_code ignored;
    client_.close(ignored);
    if (!server_.is_open()) return;
    server_.shutdown(local::socket::shutdown_send, ignored);
    timer_.expires_after(kDrainLimit);
    timer_.async_wait([self = shared_from_this()](error_code ec) {
      error_code ignored;
      if (!ec) self->server_.close(ignored);
    });
    Drain();
  }

  void Drain() {
    server_.async_read_some(asio::buffer(down_), [self = shared_from_this()](error_code ec, size_t) {
      if (!ec) return self->Drain();
      error_code ignored;
      self->timer_.cancel();
      self->server_.close(ignored);
    });
  }

  static constexpr std::chrono::seconds kDrainLimit{1};

  tcp::socket client_;
  local::socket server_;
  asio::steady_timer timer_;
  Upstreams* upstreams_;
  std::chrono::milliseconds trust_after_;
  std::shared_ptr<net::Ticket> ticket_;
  std::shared_ptr<Conn> parked_;
  size_t first_ = 0;
  bool holds_upstream_ = false, closed_ = false;
  Buffer up_, down_;
};

}  // namespace

struct TcpRelay::Impl {
  Options options;
  std::unique_ptr<asio::io_context> ioc;
  std::unique_ptr<Upstreams> upstreams;
  std::unique_ptr<net::Acceptor> acceptor;
  std::thread thread;

  void OnAccept(tcp::socket client, std::shared_ptr<net::Ticket> ticket) {
    error_code ignored;
    client.set_option(asio::socket_base::keep_alive(true), ignored);
    client.set_option(tcp::no_delay(true), ignored);
    // A second after gRPC's deadline, for its close to reach us.
    std::make_shared<Conn>(std::move(client), upstreams.get(), options.handshake_timeout + std::chrono::seconds(1),
                           std::move(ticket))
        ->Start();
  }
};

TcpRelay::TcpRelay() : impl_(std::make_unique<Impl>()) {}
TcpRelay::~TcpRelay() { Stop(); }

Status TcpRelay::Start(const Options& options) {
  if (impl_->ioc) return Status::FailedPrecondition("tls listener already started");
  tcp::endpoint ep;
  NODEVOL_RETURN_IF_ERROR(Endpoint(options.listen, &ep));
  auto ioc = std::make_unique<asio::io_context>(1);
  net::AcceptorOptions ao;
  ao.what = "tls listener";
  ao.limits.max_connections = options.max_connections;
  ao.limits.max_per_peer = options.max_per_peer;
  // Past the time a connection relayed at once needs to be trusted (gRPC's
  // deadline and a second, Conn): a silent stranger, never relayed, goes.
  ao.limits.handshake_timeout = options.handshake_timeout + std::chrono::seconds(2);
  auto acceptor = std::make_unique<net::Acceptor>(
      *ioc, ao, [impl = impl_.get()](tcp::socket s, std::shared_ptr<net::Ticket> t) {
        impl->OnAccept(std::move(s), std::move(t));
      });
  if (Status ls = acceptor->Listen(ep); !ls.ok())
    return Status::Unavailable("--tls-listen " + options.listen + ": cannot listen: " + ls.message());
  impl_->options = options;
  impl_->upstreams = std::make_unique<Upstreams>(options.unix_path, options.max_connections);
  impl_->ioc = std::move(ioc);
  impl_->acceptor = std::move(acceptor);
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

int TcpRelay::port() const { return impl_->acceptor ? impl_->acceptor->port() : 0; }
size_t TcpRelay::active() const { return impl_->acceptor ? impl_->acceptor->active() : 0; }
uint64_t TcpRelay::refused() const { return impl_->acceptor ? impl_->acceptor->refused() : 0; }
uint64_t TcpRelay::evicted() const { return impl_->acceptor ? impl_->acceptor->evicted() : 0; }

void TcpRelay::Stop() {
  if (!impl_->ioc) return;
  impl_->ioc->stop();
  impl_->thread.join();
  impl_->upstreams->Stop();
  impl_->acceptor.reset();
  impl_->ioc.reset();  // destroys the pending handlers, and with them every Conn and its sockets
  impl_->upstreams.reset();
}

}  // namespace nodevol
