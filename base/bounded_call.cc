#include "base/bounded_call.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

namespace nodevol {
namespace {

struct Call {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
};

}  // namespace

Status CallWithin(std::chrono::milliseconds limit, const std::string& what, std::function<Status()> work) {
  auto call = std::make_shared<Call>();
  // Detached: a call the kernel never finishes keeps its own thread.
  std::thread([call, work = std::move(work)] {
    Status st = work();
    std::lock_guard<std::mutex> l(call->mu);
    call->status = std::move(st);
    call->done = true;
    call->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> l(call->mu);
  if (!call->cv.wait_for(l, limit, [&] { return call->done; })) {
    return Status::DeadlineExceeded(what + " has not finished within " + std::to_string(limit.count()) +
                                    " ms: a disk is not answering (see the kernel log); it goes on in the "
                                    "background and the call may be made again once the disk answers");
  }
  return call->status;
}

}  // namespace nodevol
