// CsrRateLimit: how many serving certificates the signer issues to one
// node in a sliding hour. A healthy node asks once per renewal (every few
// days) and after an address change or a CA rotation; one that asks more
// is broken or compromised, and the signer's single worker must not be
// its to spend. Past the limit a request is denied (reason
// TooManyRequests, a Warning event on it); the node asks again after its
// recheck interval. Thread-safe; in memory, so a new leader starts from
// nothing.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>

namespace nodevol::provisioner {

class CsrRateLimit {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // `per_hour` 0: no limit.
  explicit CsrRateLimit(unsigned per_hour, Clock now = std::chrono::steady_clock::now);

  // Whether `node` may have another certificate signed now.
  bool Allows(const std::string& node);
  // A certificate was signed for `node`.
  void Note(const std::string& node);
  unsigned per_hour() const { return per_hour_; }

 private:
  void Expire(std::deque<std::chrono::steady_clock::time_point>* d, std::chrono::steady_clock::time_point now);

  const unsigned per_hour_;
  Clock now_;
  std::mutex mu_;
  std::map<std::string, std::deque<std::chrono::steady_clock::time_point>> signed_;
};

}  // namespace nodevol::provisioner
