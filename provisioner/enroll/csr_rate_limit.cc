#include "enroll/csr_rate_limit.h"

namespace nodevol::provisioner {

CsrRateLimit::CsrRateLimit(unsigned per_hour, Clock now) : per_hour_(per_hour), now_(std::move(now)) {}

void CsrRateLimit::Expire(std::deque<std::chrono::steady_clock::time_point>* d,
                          std::chrono::steady_clock::time_point now) {
  while (!d->empty() && now - d->front() >= std::chrono::hours(1)) d->pop_front();
}

bool CsrRateLimit::Allows(const std::string& node) {
  if (per_hour_ == 0) return true;
  std::lock_guard<std::mutex> l(mu_);
  auto it = signed_.find(node);
  if (it == signed_.end()) return true;
  Expire(&it->second, now_());
  if (it->second.empty()) {
    signed_.erase(it);  // nodes that come and go leave nothing behind
    return true;
  }
  return it->second.size() < per_hour_;
}

void CsrRateLimit::Note(const std::string& node) {
  if (per_hour_ == 0) return;
  std::lock_guard<std::mutex> l(mu_);
  auto& d = signed_[node];
  auto now = now_();
  Expire(&d, now);
  d.push_back(now);
}

}  // namespace nodevol::provisioner
