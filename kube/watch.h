// Watch: one watch request on a collection, streaming its events.
//
//   GET <path>?watch=1&resourceVersion=<rv>&allowWatchBookmarks=true
//       &timeoutSeconds=<random 300..600>[&labelSelector=...]
//
// Run() blocks, calling the handler for each event in order, until the
// server ends the stream (OK: resume from the last resourceVersion), the
// handler returns false, an ERROR event arrives (its Status is returned, so
// 410 is Result::Code::kExpired), the HTTP request fails, or Cancel() is
// called from another thread (kCancelled, within about a second).
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "kube/client.h"
#include "kube/result.h"
#include "kube/watch_decoder.h"

namespace nodevol::kube {

struct WatchOptions {
  std::string resource_version;  // "" = start from the current state
  std::string label_selector;
  std::string field_selector;
  int timeout_seconds = 0;  // 0: random in [300, 600], as client-go spreads reconnects
};

class Watch {
 public:
  using Handler = std::function<bool(const WatchEvent&)>;

  // `cancel`, when given, is watched instead of the Watch's own flag, so
  // one flag can stop whatever watch an owner is running.
  Watch(Client* client, std::string path, WatchOptions options, const std::atomic<bool>* cancel = nullptr);

  Result Run(const Handler& handler);
  void Cancel() { own_cancel_.store(true); }

  // The request path with its query (for tests and logs).
  std::string RequestPath() const;

 private:
  Client* client_;
  std::string path_;
  WatchOptions options_;
  std::atomic<bool> own_cancel_{false};
  const std::atomic<bool>* cancel_;
};

}  // namespace nodevol::kube
