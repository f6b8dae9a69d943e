// StopFlag: set once when the controller stops; long waits inside a pass
// (the PV save's pauses, the orphan sweep's interval) end at once then, so
// a stopping replica neither starts new work nor holds its successor up.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace nodevol::provisioner {

class StopFlag {
 public:
  void Set() {
    std::lock_guard<std::mutex> lock(mu_);
    set_ = true;
    cv_.notify_all();
  }
  bool IsSet() const {
    std::lock_guard<std::mutex> lock(mu_);
    return set_;
  }
  // Waits `d` unless set first; false if set.
  bool WaitFor(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> lock(mu_);
    return !cv_.wait_for(lock, d, [this] { return set_; });
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool set_ = false;
};

}  // namespace nodevol::provisioner
