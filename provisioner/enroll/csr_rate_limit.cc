#include "enroll/csr_rate_limit.h"

#include <algorithm>

namespace nodevol::provisioner {

CsrRateLimit::CsrRateLimit(unsigned per_hour, Clock now) : per_hour_(per_hour), now_(std::move(now)) {}

void CsrRateLimit::Expire(std::deque<Seen>* d, std::chrono::steady_clock::time_point now) {
  while (!d->empty() && now - d->front().at >= std::chrono::hours(1)) d->pop_front();
}

bool CsrRateLimit::Has(const std::deque<Seen>& d, const std::string& uid) {
  return std::any_of(d.begin(), d.end(), [&](const Seen& s) { return s.uid == uid; });
}

bool CsrRateLimit::Allows(const std::string& node, const std::string& uid) {
  if (per_hour_ == 0) return true;
  std::lock_guard<std::mutex> l(mu_);
  auto it = seen_.find(node);
  if (it == seen_.end()) return true;
  Expire(&it->second, now_());
  if (it->second.empty()) {
    seen_.erase(it);  // nodes that come and go leave nothing behind
    return true;
  }
  return Has(it->second, uid) || it->second.size() < per_hour_;
}

void CsrRateLimit::Note(const std::string& node, const std::string& uid) {
  if (per_hour_ == 0) return;
  std::lock_guard<std::mutex> l(mu_);
  auto& d = seen_[node];
  auto now = now_();
  Expire(&d, now);
  if (!Has(d, uid) && d.size() < per_hour_) d.push_back({now, uid});
}

}  // namespace nodevol::provisioner
