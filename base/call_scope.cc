#include "base/call_scope.h"

#include <algorithm>

namespace nodevol {

namespace {
thread_local const CallScope* current = nullptr;
}  // namespace

CallScope::CallScope(Clock::time_point deadline, std::string what)
    : deadline_(current ? std::min(deadline, current->deadline_) : deadline),
      what_(std::move(what)),
      outer_(current) {
  current = this;
}

CallScope::~CallScope() { current = outer_; }

CallScope::Clock::time_point CallScope::Deadline() { return current ? current->deadline_ : Clock::time_point::max(); }

const std::string& CallScope::What() {
  static const std::string none;
  return current ? current->what_ : none;
}

std::chrono::steady_clock::time_point CallScope::SteadyDeadline() {
  Clock::time_point d = Deadline();
  if (d == Clock::time_point::max()) return std::chrono::steady_clock::time_point::max();
  auto left = d - Clock::now();
  auto now = std::chrono::steady_clock::now();
  if (left <= Clock::duration::zero()) return now;
  // Far deadlines (gRPC's "infinite" is a large finite time) must not
  // overflow the steady clock.
  auto room = std::chrono::steady_clock::time_point::max() - now;
  if (std::chrono::duration_cast<std::chrono::steady_clock::duration>(left) >= room)
    return std::chrono::steady_clock::time_point::max();
  return now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(left);
}

}  // namespace nodevol
