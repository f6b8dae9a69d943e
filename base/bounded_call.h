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

}  // namespace nodevol
