#include "daemon/fd_limit.h"

#include <sys/resource.h>

#include <cerrno>
#include <string>

namespace nodevol {

Status EnsureFdBudget(size_t capped, size_t* limit) {
  struct rlimit rl;
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return Status::FromErrno("getrlimit(RLIMIT_NOFILE)", errno);
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) return Status::FromErrno("setrlimit(RLIMIT_NOFILE)", errno);
  }
  *limit = rl.rlim_cur;
  size_t want = capped + kReservedFds;
  if (rl.rlim_cur < want)
    return Status::FailedPrecondition(
        "the descriptor limit (nofile) is " + std::to_string(rl.rlim_cur) + ", below the " + std::to_string(want) +
        " nodevold needs: " + std::to_string(capped) + " for the TCP and metrics listeners' clients (3 per " +
        "--max-tcp-connections, 1 per --max-metrics-connections) and " + std::to_string(kReservedFds) +
        " for the rest; raise LimitNOFILE= (ulimit -n) or lower those options");
  return Status::Ok();
}

}  // namespace nodevol
