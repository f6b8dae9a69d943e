#include "kube/call_timeout.h"

namespace nodevol::kube {
namespace {

thread_local std::optional<std::chrono::steady_clock::time_point> tls_deadline;

}  // namespace

ScopedCallTimeout::ScopedCallTimeout(std::chrono::milliseconds limit) : previous_(tls_deadline) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  if (!tls_deadline || deadline < *tls_deadline) tls_deadline = deadline;
}

ScopedCallTimeout::~ScopedCallTimeout() { tls_deadline = previous_; }

std::optional<std::chrono::steady_clock::time_point> ScopedCallTimeout::Deadline() { return tls_deadline; }

}  // namespace nodevol::kube
