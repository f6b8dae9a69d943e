// Descriptor budget. Every network listener is capped (TcpRelay,
// httpd::HttpServer), so at most `capped` descriptors go to outside
// clients; nodevold raises its soft RLIMIT_NOFILE to the hard limit and
// refuses to start unless that leaves kReservedFds more for the unix
// socket's calls (kubelet runs one driver per mount), state files, mounts
// and pool tools, so a flood on the TCP or metrics port cannot run the unix
// listener out of descriptors.
#pragma once

#include <cstddef>

#include "base/status.h"

namespace nodevol {

inline constexpr size_t kReservedFds = 256;

// *limit gets the soft limit in force afterwards. FAILED_PRECONDITION with
// the figures when the hard limit is too low.
Status EnsureFdBudget(size_t capped, size_t* limit);

}  // namespace nodevol
