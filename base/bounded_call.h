// CallWithin: runs `work` on a thread of its own and waits for it at most
// `limit`. For I/O the kernel may never finish (a disk that stopped
// answering keeps a write in uninterruptible sleep, which no signal ends):
// past the limit the caller gets DEADLINE_EXCEEDED naming `what`, and the
// thread is left to finish on its own; its result is then dropped. `work`
// must own everything it touches (capture by value).
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "base/status.h"

namespace nodevol {

Status CallWithin(std::chrono::milliseconds limit, const std::string& what, std::function<Status()> work);

// What a call bounded by progress calls after each step it finishes (an
// entry removed, a directory synced).
using Step = std::function<void()>;

// BoundedWork: a call of CallWhileAdvancing. on_overrun runs once when the
// wait is given up; on_late_finish, on the call's own thread, when a call
// that overran finishes after all. Neither may call back into the call.
struct BoundedWork {
  std::function<Status(const Step&)> work;
  std::function<void()> on_overrun;
  std::function<void(const Status&)> on_late_finish;
};

// As CallWithin, but `limit` bounds the time since the last step (or the
// start), not the whole call: a tree of a million files is removed in as
// long as it takes, a call stuck on a disk that stopped answering is given
// up `limit` after its last step.
Status CallWhileAdvancing(std::chrono::milliseconds limit, const std::string& what, BoundedWork call);

}  // namespace nodevol
