// Registrar: registers nodevold's CSI socket with kubelet the way
// node-driver-registrar does, without a sidecar. It serves kubelet's
// pluginregistration.Registration on a socket in kubelet's
// plugins_registry directory; kubelet (inotify on that directory, and a
// scan at its start) calls GetInfo, dials the CSI endpoint for
// NodeGetInfo, writes CSINode, then calls NotifyRegistrationStatus.
//
// kubelet up to 1.35 never retries a registration that failed (the
// apiserver unreachable during CSINode's update: kubernetes#133725); a
// new attempt takes a new socket. So the registrar removes and re-creates
// its socket, after a backoff doubling from initial_backoff to
// max_backoff, when kubelet reports a failure, when no report follows a
// GetInfo within notify_timeout, and when the socket file is gone or
// replaced (checked every check_every). A success resets the backoff.
//
// The CSI socket must already answer NodeGetInfo when Start is called.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/status.h"

namespace nodevol::csi {

class Registrar {
 public:
  struct Options {
    std::string socket;    // e.g. /var/lib/kubelet/plugins_registry/nodevol.io-reg.sock
    std::string endpoint;  // the CSI socket's path, as kubelet dials it
    std::string driver;    // the CSI driver's name
    std::chrono::milliseconds notify_timeout{30000};
    std::chrono::milliseconds initial_backoff{500};
    std::chrono::milliseconds max_backoff{120000};
    std::chrono::milliseconds check_every{5000};
  };

  // What kubelet has said so far, for logs, metrics and tests.
  struct State {
    int sockets = 0;          // sockets created (attempts offered to kubelet)
    int get_info = 0;         // GetInfo calls
    bool registered = false;  // kubelet's last report was a success
    std::string last_error;   // kubelet's last failure, or why a socket was re-made
  };

  explicit Registrar(Options options);
  ~Registrar();

  // Creates the first socket (an error here is the caller's to report:
  // the directory is missing or not writable) and starts watching.
  Status Start();
  // Stops serving and removes the socket: kubelet deregisters the driver.
  void Stop();
  State state() const;

  // Called by the Registration service.
  void OnGetInfo();
  void OnStatus(bool registered, const std::string& error);

 private:
  class Service;
  Status Serve();     // a fresh socket and server
  void Unserve();     // server stopped, socket removed
  bool SocketIsOurs() const;
  void Loop();

  Options options_;
  std::unique_ptr<Service> service_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  State state_;
  bool stop_ = false;
  bool remake_ = false;            // set by a failure report
  std::chrono::steady_clock::time_point awaiting_status_since_{};
  bool awaiting_status_ = false;
  struct Served;
  std::unique_ptr<Served> served_;  // the current server and socket inode
  std::thread thread_;
};

}  // namespace nodevol::csi
