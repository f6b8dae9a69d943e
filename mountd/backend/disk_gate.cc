#include "backend/disk_gate.h"

#include <spdlog/spdlog.h>

#include <mutex>

namespace nodevol {

using Clock = std::chrono::steady_clock;

struct DiskGate::Stuck {
  std::mutex mu;
  int count = 0;        // operations past their limit, not finished
  std::string what;     // the first of them
  Clock::time_point since;
};

DiskGate::DiskGate(std::string pool, std::string path, std::chrono::milliseconds limit)
    : pool_(std::move(pool)), path_(std::move(path)), limit_(limit), stuck_(std::make_shared<Stuck>()) {}

Status DiskGate::Check() const {
  std::lock_guard<std::mutex> l(stuck_->mu);
  if (stuck_->count == 0) return Status::Ok();
  auto waited = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - stuck_->since);
  return Status::Unavailable("pool " + pool_ + ": the disk under " + path_ + " has not answered for " +
                             std::to_string(waited.count()) + " s (" + stuck_->what +
                             " still waits in the kernel; see the kernel log); nothing new is started on it until "
                             "that finishes: call again then");
}

Status DiskGate::Run(const std::string& what, std::function<Status(const Step&)> work,
                     std::chrono::milliseconds limit) {
  NODEVOL_RETURN_IF_ERROR(Check());
  auto stuck = stuck_;
  auto start = Clock::now();
  BoundedWork call;
  call.work = std::move(work);
  call.on_overrun = [stuck, what, pool = pool_, limit] {
    std::lock_guard<std::mutex> l(stuck->mu);
    if (stuck->count++ == 0) {
      stuck->what = what;
      stuck->since = Clock::now() - limit;
    }
    spdlog::error("pool {}: {} has made no progress for {} ms: its disk is not answering (see the kernel log); "
                  "the pool takes no new operation until it finishes",
                  pool, what, limit.count());
  };
  call.on_late_finish = [stuck, what, pool = pool_, start](const Status& st) {
    std::lock_guard<std::mutex> l(stuck->mu);
    --stuck->count;
    auto took = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start);
    spdlog::warn("pool {}: {} finished after {} s ({}); {}", pool, what, took.count(), st.ok() ? "OK" : st.ToString(),
                 stuck->count == 0 ? "the disk answers again" : "others still wait");
  };
  return CallWhileAdvancing(limit, "pool " + pool_ + ": " + what, std::move(call));
}

}  // namespace nodevol
