#include "base/bounded_call.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

namespace nodevol {
namespace {

using Clock = std::chrono::steady_clock;

struct Call {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  bool overran = false;
  Status status;
  Clock::time_point last_step = Clock::now();
};

// `stalled`: what the caller is told past the limit, after `what`.
Status Run(std::chrono::milliseconds limit, const std::string& what, const std::string& stalled, BoundedWork bounded) {
  auto call = std::make_shared<Call>();
  auto step = [call] {
    std::lock_guard<std::mutex> l(call->mu);
    call->last_step = Clock::now();
  };
  // Detached: a call the kernel never finishes keeps its own thread.
  std::thread([call, step, work = std::move(bounded.work), late = std::move(bounded.on_late_finish)] {
    Status st = work(step);
    std::lock_guard<std::mutex> l(call->mu);
    call->status = st;
    call->done = true;
    call->cv.notify_all();
    if (call->overran && late) late(st);
  }).detach();
  std::unique_lock<std::mutex> l(call->mu);
  for (;;) {
    Clock::time_point deadline = call->last_step + limit;
    if (call->cv.wait_until(l, deadline, [&] { return call->done; })) return call->status;
    if (Clock::now() >= call->last_step + limit) break;  // else a step came meanwhile: wait on
  }
  call->overran = true;
  // Under the call's lock: the thread, finishing, sees either done or
  // overran, so on_late_finish never runs before on_overrun.
  if (bounded.on_overrun) bounded.on_overrun();
  return Status::DeadlineExceeded(what + stalled + std::to_string(limit.count()) +
                                  " ms: a disk is not answering (see the kernel log); it goes on in the "
                                  "background and the call may be made again once the disk answers");
}

}  // namespace

Status CallWithin(std::chrono::milliseconds limit, const std::string& what, std::function<Status()> work) {
  return Run(limit, what, " has not finished within ",
             {[work = std::move(work)](const Step&) { return work(); }, {}, {}});
}

Status CallWhileAdvancing(std::chrono::milliseconds limit, const std::string& what, BoundedWork call) {
  return Run(limit, what, " has made no progress for ", std::move(call));
}

}  // namespace nodevol
