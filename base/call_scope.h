// CallScope: the call this thread serves for someone who waits for it — its
// deadline (when that caller stops waiting) and what it is ("Publish").
// Set once where a call comes in (CallRunner for every RPC, the flex door
// for its calls) and read by every wait below it, so that no lock, gate
// or backend step keeps a thread past the moment its answer stops
// mattering. Threads that serve no caller (start-up, re-staging) have no
// deadline: time_point::max().
#pragma once

#include <chrono>
#include <string>

namespace nodevol {

class CallScope {
 public:
  using Clock = std::chrono::system_clock;
  // A scope inside another keeps the earlier (outer) deadline when that
  // is sooner: a call never waits longer than the one it serves.
  CallScope(Clock::time_point deadline, std::string what);
  ~CallScope();
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

  // Of the innermost scope on this thread; max() and "" outside any.
  static Clock::time_point Deadline();
  static const std::string& What();
  // The deadline as a steady_clock time, for condition variables and
  // poll: max() when there is none, now() when it has passed.
  static std::chrono::steady_clock::time_point SteadyDeadline();

 private:
  Clock::time_point deadline_;
  std::string what_;
  const CallScope* outer_;
};

}  // namespace nodevol
