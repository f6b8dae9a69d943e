// CsrRateLimit: how many certificate requests the signer decides for one
// node in a sliding hour, signed or denied alike (each is counted once,
// by its uid, however often it is looked at). A healthy node asks once
// per renewal (every few days) and after an address change or a CA
// rotation; one that asks more is broken or compromised, and the signer's
// single worker must not be its to spend. Past the limit a request is
// denied (reason TooManyRequests, a Warning event on it), or marked
// Failed when someone else approved it; the node asks again after its
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

  // Whether request `uid` of `node` may be decided now: true for one
  // already counted.
  bool Allows(const std::string& node, const std::string& uid);
  // Request `uid` of `node` was decided (counted once).
  void Note(const std::string& node, const std::string& uid);
  unsigned per_hour() const { return per_hour_; }

 private:
  struct Seen {
    std::chrono::steady_clock::time_point at;
    std::string uid;
  };
  void Expire(std::deque<Seen>* d, std::chrono::steady_clock::time_point now);
  static bool Has(const std::deque<Seen>& d, const std::string& uid);

  const unsigned per_hour_;
  Clock now_;
  std::mutex mu_;
  std::map<std::string, std::deque<Seen>> seen_;  // at most per_hour_ per node
};

}  // namespace nodevol::provisioner
