// ScopedCallTimeout: while one lives, every Client request made on its
// thread ends within `limit` of the scope's start: all attempts together
// (a 401 retry included), connect and transfer alike. Leader election uses
// it so that a renewal cannot outlast the renew deadline (a renewal that
// succeeded after the deadline would let two replicas act at once).
// Nested scopes keep the earlier deadline.
#pragma once

#include <chrono>
#include <optional>

namespace nodevol::kube {

class ScopedCallTimeout {
 public:
  explicit ScopedCallTimeout(std::chrono::milliseconds limit);
  ~ScopedCallTimeout();
  ScopedCallTimeout(const ScopedCallTimeout&) = delete;
  ScopedCallTimeout& operator=(const ScopedCallTimeout&) = delete;

  // The deadline in force on this thread, if any.
  static std::optional<std::chrono::steady_clock::time_point> Deadline();

 private:
  std::optional<std::chrono::steady_clock::time_point> previous_;
};

}  // namespace nodevol::kube
