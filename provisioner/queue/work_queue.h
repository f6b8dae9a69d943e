// WorkQueue: keys of objects to reconcile, with client-go's workqueue
// semantics (rate-limiting, delaying queue) so controllers written against
// that model behave the same here:
//  - a key waiting in the queue is held once however often it is added;
//  - a key handed out by Get is never handed to a second worker until Done;
//    if it is added meanwhile it is queued again at Done;
//  - AddAfter holds a key back until a time (the earlier wins if added twice);
//    AddRateLimited does so by the RateLimiter's delay; Forget ends the backoff;
//  - ShutDown wakes every Get, which returns false from then on: queued,
//    delayed and later keys are dropped (unlike client-go, which hands out
//    what is queued: a replica that stops, e.g. on losing its lease, must
//    not start anything new); keys being processed finish and are not
//    queued again.
// Thread-safe; time comes from a Clock so delays are testable.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "queue/rate_limiter.h"
#include "base/clock.h"

namespace nodevol {

class WorkQueue {
 public:
  explicit WorkQueue(const Clock* clock = Clock::Real(), RateLimiterOptions options = {});
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void Add(const std::string& key);
  void AddAfter(const std::string& key, Clock::Duration delay);
  void AddRateLimited(const std::string& key);
  void Forget(const std::string& key);
  int NumRequeues(const std::string& key) const;

  // Blocks until a key is ready (true) or the queue is shut down and empty
  // (false). The caller must call Done(key) when finished with it.
  bool Get(std::string* key);
  void Done(const std::string& key);

  // Keys ready to be handed out (not those being processed or delayed).
  size_t Len();

  void ShutDown();
  // ShutDown, then wait until every key handed out has been Done.
  void ShutDownWithDrain();
  bool ShuttingDown() const;

 private:
  void AddLocked(const std::string& key);
  void PromoteReadyLocked();
  void ShutDownLocked();

  const Clock* const clock_;
  RateLimiter limiter_;

  mutable std::mutex mu_;
  std::condition_variable cv_;        // getters: a key is ready, time passed, shutdown
  std::condition_variable drained_;   // ShutDownWithDrain: processing became empty
  std::deque<std::string> queue_;
  std::unordered_set<std::string> dirty_;       // needs processing (queued or re-added)
  std::unordered_set<std::string> processing_;  // handed out, not Done yet
  std::unordered_map<std::string, Clock::TimePoint> waiting_;  // delayed keys
  std::set<std::pair<Clock::TimePoint, std::string>> waiting_order_;
  bool shutting_down_ = false;
};

}  // namespace nodevol
