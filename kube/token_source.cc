#include "kube/token_source.h"

#include <fstream>
#include <sstream>

namespace nodevol::kube {

TokenSource TokenSource::Fixed(std::string token) {
  TokenSource s;
  s.token_ = std::move(token);
  s.stale_ = false;
  return s;
}

TokenSource TokenSource::File(std::string path, std::chrono::seconds refresh, Clock clock) {
  TokenSource s;
  s.path_ = std::move(path);
  s.refresh_ = refresh;
  s.clock_ = std::move(clock);
  return s;
}

TokenSource::TokenSource(TokenSource&& o) noexcept { *this = std::move(o); }

TokenSource& TokenSource::operator=(TokenSource&& o) noexcept {
  if (this != &o) {
    std::scoped_lock lock(mu_, o.mu_);
    token_ = std::move(o.token_);
    path_ = std::move(o.path_);
    refresh_ = o.refresh_;
    clock_ = std::move(o.clock_);
    stale_ = o.stale_;
    read_at_ = o.read_at_;
  }
  return *this;
}

std::chrono::steady_clock::time_point TokenSource::Now() const {
  return clock_ ? clock_() : std::chrono::steady_clock::now();
}

std::string TokenSource::Get(Status* error) {
  std::lock_guard<std::mutex> lock(mu_);
  if (path_.empty()) return token_;
  auto now = Now();
  if (stale_ || now - read_at_ >= refresh_) {
    std::ifstream in(path_);
    std::ostringstream ss;
    if (in) ss << in.rdbuf();
    std::string t = ss.str();
    while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
    if (in && !t.empty()) {
      token_ = std::move(t);
      stale_ = false;
      read_at_ = now;
    } else if (error != nullptr) {
      // Keep the last good token; try again on the next call.
      *error = Status::Unavailable("cannot read token file " + path_ + (in ? " (empty)" : ""));
    }
  }
  return token_;
}

void TokenSource::Invalidate() {
  std::lock_guard<std::mutex> lock(mu_);
  stale_ = true;
}

}  // namespace nodevol::kube
