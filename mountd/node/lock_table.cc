#include "node/lock_table.h"

#include <cstdio>

#include "base/call_scope.h"

namespace nodevol {

int LockTable::Waiting(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = entries_.find(key);
  return it == entries_.end() ? 0 : it->second.waiters;
}

Status LockTable::Lock(const std::string& key) {
  const auto deadline = CallScope::SteadyDeadline();
  std::unique_lock<std::mutex> l(mu_);
  Entry& e = entries_[key];
  ++e.waiters;
  bool got = true;
  // No deadline: a plain wait (a wait_until max() can overflow converting
  // between clocks).
  if (deadline == std::chrono::steady_clock::time_point::max())
    cv_.wait(l, [&] { return !e.held; });
  else
    got = cv_.wait_until(l, deadline, [&] { return !e.held; });
  --e.waiters;
  if (!got) {
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - e.since).count();
    char held_for[32];
    std::snprintf(held_for, sizeof held_for, "%.1f", secs);
    std::string holder = e.holder.empty() ? "another operation" : "a " + e.holder + " call";
    return Status::DeadlineExceeded(key + " is busy: " + holder + " has held it for " + held_for +
                                    " s (its disk or server may not be answering); this call waited until its "
                                    "caller's deadline and changed nothing. It may be made again; once that "
                                    "call ends it goes through");
  }
  e.held = true;
  e.holder = CallScope::What();
  e.since = std::chrono::steady_clock::now();
  return Status::Ok();
}

void LockTable::Unlock(const std::string& key) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = entries_.find(key);
  it->second.held = false;
  if (it->second.waiters == 0) entries_.erase(it);
  cv_.notify_all();
}

}  // namespace nodevol
