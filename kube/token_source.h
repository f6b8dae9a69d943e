// TokenSource: the bearer token for requests, either fixed or read from a
// file that rotates (bound service-account tokens are refreshed by kubelet).
//
// A file token is re-read when older than the refresh interval (a minute by
// default, as client-go) and after Invalidate(), which the client calls on a
// 401. A failed re-read keeps the last good token. Thread-safe. The token is
// never logged or put into a message.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <string>

#include "base/status.h"

namespace nodevol::kube {

class TokenSource {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  // No token at all: requests carry no Authorization header.
  TokenSource() = default;
  static TokenSource Fixed(std::string token);
  static TokenSource File(std::string path, std::chrono::seconds refresh = std::chrono::seconds(60),
                          Clock clock = nullptr);

  TokenSource(TokenSource&& other) noexcept;
  TokenSource& operator=(TokenSource&& other) noexcept;

  bool empty() const { return token_.empty() && path_.empty(); }
  bool from_file() const { return !path_.empty(); }
  // The current token ("" when none could ever be read; *error says why).
  std::string Get(Status* error = nullptr);
  // Forces a re-read on the next Get (after a 401).
  void Invalidate();

 private:
  std::chrono::steady_clock::time_point Now() const;

  std::mutex mu_;
  std::string token_;
  std::string path_;
  std::chrono::seconds refresh_{60};
  Clock clock_;
  bool stale_ = true;
  std::chrono::steady_clock::time_point read_at_{};
};

}  // namespace nodevol::kube
