#include "net/acceptor.h"

#include <map>
#include <mutex>
#include <vector>

#include <boost/asio/steady_timer.hpp>
#include <spdlog/spdlog.h>

namespace nodevol::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

// Shared by the acceptor and its tickets: a ticket may outlive the
// acceptor (sessions die when their io_context is destroyed).
struct AcceptorState {
  explicit AcceptorState(const AcceptorOptions& o) : what(o.what), admission(o.limits) {}
  std::string what;
  std::mutex mu;  // tickets die on whichever thread drops them last
  Admission admission;
  std::map<Admission::Id, std::function<void()>> closers;
  std::atomic<size_t> active{0};
  std::atomic<uint64_t> refused{0}, evicted{0}, expired{0};

  // Takes the closers of `ids` out (to be called with mu released: a
  // closer may drop the last reference to a session, whose ticket locks mu).
  std::vector<std::function<void()>> TakeClosers(const std::vector<Admission::Id>& ids) {
    std::vector<std::function<void()>> out;
    for (Admission::Id id : ids) {
      auto it = closers.find(id);
      if (it == closers.end()) continue;
      if (it->second) out.push_back(std::move(it->second));
      closers.erase(it);
    }
    active = admission.size();
    return out;
  }
};

Ticket::Ticket(std::shared_ptr<AcceptorState> state, Admission::Id id, std::string peer)
    : state_(std::move(state)), id_(id), peer_(std::move(peer)) {}

Ticket::~Ticket() {
  std::lock_guard lock(state_->mu);
  state_->admission.Remove(id_);
  state_->closers.erase(id_);
  state_->active = state_->admission.size();
}

void Ticket::Idle() {
  std::lock_guard lock(state_->mu);
  state_->admission.Set(id_, ConnState::kIdle, Admission::Clock::now());
}

void Ticket::Busy() {
  std::lock_guard lock(state_->mu);
  state_->admission.Set(id_, ConnState::kBusy, Admission::Clock::now());
}

void Ticket::Restart() {
  std::lock_guard lock(state_->mu);
  state_->admission.Set(id_, ConnState::kNew, Admission::Clock::now());
}

void Ticket::OnClose(std::function<void()> close) {
  std::lock_guard lock(state_->mu);
  auto it = state_->closers.find(id_);
  if (it != state_->closers.end()) it->second = std::move(close);
}

struct Acceptor::Sockets {
  explicit Sockets(asio::io_context& ioc) : acceptor(ioc), retry(ioc), sweep(ioc) {}
  tcp::acceptor acceptor;
  asio::steady_timer retry, sweep;
  int port = 0;
};

Acceptor::Acceptor(asio::io_context& ioc, AcceptorOptions options, OnAccept on_accept)
    : ioc_(ioc),
      state_(std::make_shared<AcceptorState>(options)),
      on_accept_(std::move(on_accept)),
      sockets_(std::make_unique<Sockets>(ioc)) {}

Acceptor::~Acceptor() = default;

Status Acceptor::Listen(const tcp::endpoint& ep) {
  error_code ec;
  tcp::acceptor& a = sockets_->acceptor;
  a.open(ep.protocol(), ec);
  // reuse_address only lets a restarted program bind over TIME_WAIT
  // sockets; a live listener on the port still makes bind() fail.
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (!ec) sockets_->port = a.local_endpoint(ec).port();
  if (ec) return Status::Unavailable(ec.message());
  Accept();
  Sweep();
  return Status::Ok();
}

int Acceptor::port() const { return sockets_->port; }
size_t Acceptor::active() const { return state_->active.load(); }
uint64_t Acceptor::refused() const { return state_->refused.load(); }
uint64_t Acceptor::evicted() const { return state_->evicted.load(); }
uint64_t Acceptor::expired() const { return state_->expired.load(); }

namespace {

// IPv4 clients of a dual-stack socket arrive as ::ffff:a.b.c.d; they are
// the same peer as a.b.c.d.
std::string PeerOf(const tcp::socket& s) {
  error_code ec;
  auto ep = s.remote_endpoint(ec);
  if (ec) return "?";
  auto addr = ep.address();
  if (addr.is_v6() && addr.to_v6().is_v4_mapped())
    return asio::ip::make_address_v4(asio::ip::v4_mapped, addr.to_v6()).to_string();
  return addr.to_string();
}

}  // namespace

void Acceptor::Accept() {
  sockets_->acceptor.async_accept([this](error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (ec) {
      // E.g. EMFILE: retrying at once would spin, so back off a little.
      spdlog::warn("{}: accept failed: {}", state_->what, ec.message());
      sockets_->retry.expires_after(std::chrono::milliseconds(100));
      sockets_->retry.async_wait([this](error_code ec) {
        if (!ec) Accept();
      });
      return;
    }
    std::string peer = PeerOf(socket);
    std::function<void()> close_evicted;
    Admission::Verdict v;
    {
      std::lock_guard lock(state_->mu);
      v = state_->admission.Arrive(peer, Admission::Clock::now());
      if (v.evict) {
        auto closers = state_->TakeClosers({v.evict});
        if (!closers.empty()) close_evicted = std::move(closers.front());
      }
      if (v.id) state_->closers[v.id] = nullptr;
      state_->active = state_->admission.size();
    }
    if (close_evicted) close_evicted();
    if (v.evict && state_->evicted++ % 1000 == 0)
      spdlog::warn("{}: no room for a connection from {}; closed one that had not authenticated ({} so far)",
                   state_->what, peer, state_->evicted.load());
    if (!v.id) {
      // Closed at once: the flood costs one descriptor for a moment, and
      // the log says so once per 1000.
      if (state_->refused++ % 1000 == 0)
        spdlog::warn("{}: every slot ({} in all, {} per address) is held by authenticated clients; refused one "
                     "from {} ({} so far)",
                     state_->what, state_->admission.limits().max_connections, state_->admission.max_per_peer(),
                     peer, state_->refused.load());
      error_code ignored;
      socket.close(ignored);
      return Accept();
    }
    on_accept_(std::move(socket), std::shared_ptr<Ticket>(new Ticket(state_, v.id, std::move(peer))));
    Accept();
  });
}

// Four times a handshake deadline: a stalled handshake is closed within a
// quarter of its deadline late.
void Acceptor::Sweep() {
  auto every = std::max<std::chrono::milliseconds>(std::chrono::milliseconds(50),
                                                   state_->admission.limits().handshake_timeout / 4);
  sockets_->sweep.expires_after(every);
  sockets_->sweep.async_wait([this](error_code ec) {
    if (ec) return;
    std::vector<std::function<void()>> closers;
    {
      std::lock_guard lock(state_->mu);
      closers = state_->TakeClosers(state_->admission.Expired(Admission::Clock::now()));
    }
    state_->expired += closers.size();
    for (auto& c : closers) c();
    Sweep();
  });
}

}  // namespace nodevol::net
