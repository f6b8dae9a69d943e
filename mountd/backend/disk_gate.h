// DiskGate: the work a pool does on its disk — a dir pool's file
// operations, an LVM volume's staging mount, any pool's fsGroup walk —
// each bounded by its progress (base/bounded_call.h, CallWhileAdvancing). A disk that stops answering
// keeps an operation in the kernel for as long as it is gone, and no
// signal ends it: the caller gets DEADLINE_EXCEEDED once `limit` passed
// without a step, and from then on, until that operation finishes, every
// new one fails at once with UNAVAILABLE naming it. The dead disk costs
// one stuck thread rather than one per retry, and no retry runs beside the
// stuck call when the disk wakes up, and a hung pool with many pods
// starting holds one thread, not one per pod (nor the flex door's
// connections). Each pool has its own gate (Backend::disk_gate()).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "base/bounded_call.h"
#include "base/status.h"

namespace nodevol {

class DiskGate {
 public:
  DiskGate(std::string pool, std::string path, std::chrono::milliseconds limit);

  // Runs work (which must own what it touches: capture by value) unless
  // an earlier operation is still stuck.
  Status Run(const std::string& what, std::function<Status(const Step&)> work) {
    return Run(what, std::move(work), limit_);
  }
  // With a limit of its own: a step that may rightly take long (a mount
  // replaying a journal after a power loss reports no progress).
  Status Run(const std::string& what, std::function<Status(const Step&)> work, std::chrono::milliseconds limit);
  // UNAVAILABLE while an operation is stuck, else OK: for the operations
  // not bounded here (a copy's syncfs may rightly take minutes).
  Status Check() const;

  std::chrono::milliseconds limit() const { return limit_; }

 private:
  struct Stuck;
  const std::string pool_, path_;
  const std::chrono::milliseconds limit_;
  std::shared_ptr<Stuck> stuck_;  // shared with the operations' threads
};

}  // namespace nodevol
