// SocketProbe: proves that nodevold's unix socket answers, the way a client
// would: a new connection and a real GetInfo. The watchdog is pinged and
// /healthz says ok only while the last probe answered; a listener gRPC
// stopped (issue 25: EMFILE ends it for good) makes systemd restart the
// daemon instead of leaving kubelet's mounts failing behind a green probe.
#pragma once

#include <chrono>
#include <mutex>
#include <string>

namespace nodevol {

class SocketProbe {
 public:
  SocketProbe(std::string socket, std::chrono::milliseconds deadline) : socket_(std::move(socket)), deadline_(deadline) {}

  // Connects afresh (no connection is reused: an old one can outlive a dead
  // listener) and calls GetInfo. Returns whether it answered in time.
  bool Run();
  // "" after an answer; else what went wrong ("not probed yet" before Run).
  std::string Failure() const;

 private:
  const std::string socket_;
  const std::chrono::milliseconds deadline_;
  mutable std::mutex mu_;
  std::string failure_ = "not probed yet";
};

}  // namespace nodevol
