// Acceptor: the one way nodevol takes TCP connections from a network it
// does not trust (the scheduler extender, the probe and metrics ports,
// nodevold's mutual-TLS port). It accepts on a listening socket, decides
// by the rules of net/admission.h whom to keep when strangers flood it,
// closes connections that have not authenticated by the handshake
// deadline (and idle ones past the idle deadline), and hands each kept
// connection to the server with a Ticket through which the server tells
// it how far the connection has come. A failed accept (EMFILE) is retried
// after 100 ms, never the end of the listener.
//
// Why one mechanism: each listener used to count from accept and refuse
// the newest connection when full, so 64 sockets that never sent a byte
// shut out kube-scheduler (issue 57). Here a stranger can only ever take
// another stranger's place.
//
// Everything runs on the io_context's thread (one thread); a Ticket may
// be destroyed anywhere.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "base/status.h"
#include "net/admission.h"

namespace nodevol::net {

struct AcceptorOptions {
  std::string what;  // names the listener in logs ("extender", "tls listener")
  AdmissionLimits limits;
};

struct AcceptorState;

// One kept connection, held by the server's session for as long as the
// connection lives. Idle and Busy are called on the listener's thread.
class Ticket {
 public:
  ~Ticket();
  Ticket(const Ticket&) = delete;
  Ticket& operator=(const Ticket&) = delete;

  // Authenticated and waiting for a request (after the TLS handshake, or
  // after a request is answered).
  void Idle();
  // A request in progress (or, for a relay, authenticated for good): never
  // expired; evicted only where anyone can authenticate (evict_idle).
  void Busy();
  // Not authenticated after all, as from now: the handshake deadline
  // starts over (a relay's client that waited for its server).
  void Restart();
  // How the acceptor closes this connection when it is evicted or
  // expires; called on the listener's thread, at most once.
  void OnClose(std::function<void()> close);
  const std::string& peer() const { return peer_; }

 private:
  friend class Acceptor;
  Ticket(std::shared_ptr<AcceptorState> state, Admission::Id id, std::string peer);
  std::shared_ptr<AcceptorState> state_;
  Admission::Id id_;
  std::string peer_;
};

class Acceptor {
 public:
  using OnAccept = std::function<void(boost::asio::ip::tcp::socket, std::shared_ptr<Ticket>)>;

  Acceptor(boost::asio::io_context& ioc, AcceptorOptions options, OnAccept on_accept);
  ~Acceptor();  // Closes the listening socket; kept connections are the server's.
  Acceptor(const Acceptor&) = delete;
  Acceptor& operator=(const Acceptor&) = delete;

  // Binds and listens on ep, and starts accepting. UNAVAILABLE with the
  // system's reason when the bind fails.
  Status Listen(const boost::asio::ip::tcp::endpoint& ep);
  int port() const;

  size_t active() const;     // connections kept now
  uint64_t refused() const;  // newcomers closed at accept (rule 3)
  uint64_t evicted() const;  // kept ones closed for a newcomer (rules 1, 2)
  uint64_t expired() const;  // closed at a deadline

 private:
  void Accept();
  void Sweep();

  boost::asio::io_context& ioc_;
  std::shared_ptr<AcceptorState> state_;
  OnAccept on_accept_;
  struct Sockets;
  std::unique_ptr<Sockets> sockets_;
};

}  // namespace nodevol::net
