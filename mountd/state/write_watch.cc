#include "state/write_watch.h"

namespace nodevol {

WriteWatch::Scope::Scope(WriteWatch* watch, std::string what) : watch_(watch) {
  std::lock_guard<std::mutex> l(watch_->mu_);
  id_ = watch_->next_++;
  watch_->running_.emplace(id_, Write{Clock::now(), std::move(what)});
}

WriteWatch::Scope::~Scope() {
  std::lock_guard<std::mutex> l(watch_->mu_);
  watch_->running_.erase(id_);
}

std::chrono::milliseconds WriteWatch::Oldest(std::string* what) const {
  std::lock_guard<std::mutex> l(mu_);
  if (running_.empty()) return std::chrono::milliseconds(0);
  const Write& w = running_.begin()->second;
  *what = w.what;
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - w.start);
}

}  // namespace nodevol
