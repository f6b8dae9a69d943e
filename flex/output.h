// Output: guarantees kubelet reads exactly one JSON object, whatever happens.
//
// TakeStdout() keeps the real stdout for the Reply alone and points fds 1
// and 2 at /dev/null, so nothing a library prints can corrupt the answer.
// If the driver crashes or outlives its watchdog, a signal handler writes a
// Failure answer instead (once: WriteReply and the handlers race for a flag).
#pragma once

#include <chrono>
#include <string>

#include "reply.h"

namespace nodevol::flex {

void TakeStdout();
// After `limit`, answer Failure with `why` and exit.
void ArmWatchdog(std::chrono::milliseconds limit, const std::string& why);
// Writes the reply (unless a handler already answered).
void WriteReply(const Reply& reply);

}  // namespace nodevol::flex
