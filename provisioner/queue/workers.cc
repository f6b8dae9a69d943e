#include "queue/workers.h"

#include <spdlog/spdlog.h>

#include <exception>
#include <utility>

namespace nodevol {

Workers::Workers(std::string name, WorkQueue* queue, int count, int max_failures, Process process, GaveUp gave_up)
    : name_(std::move(name)), queue_(queue) {
  for (int i = 0; i < count; ++i) {
    threads_.emplace_back([this, max_failures, process, gave_up] {
      while (ProcessNext(name_, queue_, max_failures, process, gave_up)) {
      }
    });
  }
}

Workers::~Workers() {
  queue_->ShutDown();
  for (std::thread& t : threads_) t.join();
}

bool Workers::ProcessNext(const std::string& name, WorkQueue* queue, int max_failures, const Process& process,
                          const GaveUp& gave_up) {
  std::string key;
  if (!queue->Get(&key)) return false;
  Outcome outcome;
  try {
    outcome = process(key);
  } catch (const std::exception& e) {
    spdlog::error("{} {}: {}", name, key, e.what());
    outcome = Outcome::kRetry;
  }
  switch (outcome) {
    case Outcome::kDone:
      queue->Forget(key);
      break;
    case Outcome::kRetry: {
      int failures = queue->NumRequeues(key);
      if (max_failures <= 0 || failures < max_failures) {
        queue->AddRateLimited(key);
      } else {
        spdlog::warn("{} {}: giving up after {} failures until it changes", name, key, failures + 1);
        if (gave_up) gave_up(key, false);
      }
      break;
    }
    case Outcome::kGiveUp:
      if (gave_up) gave_up(key, true);
      break;
    case Outcome::kLater:
      queue->AddAfter(key, kLaterDelay);
      break;
  }
  queue->Done(key);
  return true;
}

}  // namespace nodevol
