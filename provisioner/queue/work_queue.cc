#include "queue/work_queue.h"

namespace nodevol {

WorkQueue::WorkQueue(const Clock* clock, RateLimiterOptions options) : clock_(clock), limiter_(clock, options) {}

void WorkQueue::Add(const std::string& key) {
  std::lock_guard<std::mutex> guard(mu_);
  AddLocked(key);
}

void WorkQueue::AddLocked(const std::string& key) {
  if (shutting_down_) return;
  if (!dirty_.insert(key).second) return;  // already waiting to be processed
  if (processing_.count(key) != 0) return;  // Done puts it back
  queue_.push_back(key);
  cv_.notify_one();
}

void WorkQueue::AddAfter(const std::string& key, Clock::Duration delay) {
  std::lock_guard<std::mutex> guard(mu_);
  if (shutting_down_) return;
  if (delay <= Clock::Duration::zero()) {
    AddLocked(key);
    return;
  }
  Clock::TimePoint ready = clock_->Now() + delay;
  auto it = waiting_.find(key);
  if (it != waiting_.end()) {
    if (it->second <= ready) return;  // already due sooner
    waiting_order_.erase({it->second, key});
    it->second = ready;
  } else {
    waiting_.emplace(key, ready);
  }
  waiting_order_.emplace(ready, key);
  // Getters may be sleeping towards a later deadline, or with none at all.
  cv_.notify_all();
}

void WorkQueue::AddRateLimited(const std::string& key) { AddAfter(key, limiter_.When(key)); }

void WorkQueue::Forget(const std::string& key) { limiter_.Forget(key); }

int WorkQueue::NumRequeues(const std::string& key) const { return limiter_.NumRequeues(key); }

void WorkQueue::PromoteReadyLocked() {
  if (waiting_order_.empty()) return;
  Clock::TimePoint now = clock_->Now();
  while (!waiting_order_.empty() && waiting_order_.begin()->first <= now) {
    std::string key = waiting_order_.begin()->second;
    waiting_order_.erase(waiting_order_.begin());
    waiting_.erase(key);
    AddLocked(key);
  }
}

bool WorkQueue::Get(std::string* key) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (shutting_down_) return false;
    PromoteReadyLocked();
    if (!queue_.empty()) break;
    if (waiting_order_.empty()) {
      cv_.wait(lock);
    } else {
      clock_->WaitUntil(cv_, lock, waiting_order_.begin()->first);
    }
  }
  *key = std::move(queue_.front());
  queue_.pop_front();
  processing_.insert(*key);
  dirty_.erase(*key);
  // This getter may have been the one timing the delayed keys: pass the
  // duty on to another sleeping getter.
  if (!waiting_order_.empty()) cv_.notify_one();
  return true;
}

void WorkQueue::Done(const std::string& key) {
  std::lock_guard<std::mutex> guard(mu_);
  processing_.erase(key);
  if (dirty_.count(key) != 0) {
    queue_.push_back(key);
    cv_.notify_one();
  }
  if (processing_.empty()) drained_.notify_all();
}

size_t WorkQueue::Len() {
  std::lock_guard<std::mutex> guard(mu_);
  PromoteReadyLocked();
  return queue_.size();
}

void WorkQueue::ShutDownLocked() {
  shutting_down_ = true;
  queue_.clear();
  dirty_.clear();
  waiting_.clear();
  waiting_order_.clear();
  cv_.notify_all();
}

void WorkQueue::ShutDown() {
  std::lock_guard<std::mutex> guard(mu_);
  ShutDownLocked();
}

void WorkQueue::ShutDownWithDrain() {
  std::unique_lock<std::mutex> lock(mu_);
  ShutDownLocked();
  drained_.wait(lock, [this] { return processing_.empty(); });
}

bool WorkQueue::ShuttingDown() const {
  std::lock_guard<std::mutex> guard(mu_);
  return shutting_down_;
}

}  // namespace nodevol
