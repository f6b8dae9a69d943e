#include "kube/watch.h"

#include <random>

namespace nodevol::kube {

Watch::Watch(Client* client, std::string path, WatchOptions options, const std::atomic<bool>* cancel)
    : client_(client), path_(std::move(path)), options_(std::move(options)),
      cancel_(cancel != nullptr ? cancel : &own_cancel_) {
  if (options_.timeout_seconds <= 0) {
    thread_local std::mt19937 rng(std::random_device{}());
    options_.timeout_seconds = std::uniform_int_distribution<int>(300, 600)(rng);
  }
}

std::string Watch::RequestPath() const {
  std::string q = path_ + (path_.find('?') == std::string::npos ? "?" : "&") + "watch=1";
  if (!options_.resource_version.empty()) q += "&resourceVersion=" + Client::EscapeQuery(options_.resource_version);
  q += "&allowWatchBookmarks=true&timeoutSeconds=" + std::to_string(options_.timeout_seconds);
  if (!options_.label_selector.empty()) q += "&labelSelector=" + Client::EscapeQuery(options_.label_selector);
  if (!options_.field_selector.empty()) q += "&fieldSelector=" + Client::EscapeQuery(options_.field_selector);
  return q;
}

Result Watch::Run(const Handler& handler) {
  WatchDecoder decoder;
  std::vector<WatchEvent> events;
  Result stop_reason;  // set when we end the stream ourselves
  bool stopped = false;
  auto on_data = [&](std::string_view bytes) {
    events.clear();
    Status st = decoder.Feed(bytes, &events);
    for (const WatchEvent& e : events) {
      if (e.type == WatchEvent::Type::kError) {
        stop_reason = e.error;
        stopped = true;
        return false;
      }
      if (!handler(e)) {
        stop_reason = Result::Cancelled();
        stopped = true;
        return false;
      }
    }
    if (!st.ok()) {
      stop_reason = Result(Result::Code::kOther, 200, "", st.message());
      stopped = true;
      return false;
    }
    return true;
  };
  // The server closes the stream at timeoutSeconds; the client's limit is a
  // margin past that, for a stream that hangs.
  Result r = client_->Stream(RequestPath(), std::chrono::seconds(options_.timeout_seconds + 30), on_data, cancel_);
  if (stopped) return stop_reason;
  if (r.ok()) {
    Status st = decoder.Finish();
    if (!st.ok()) return Result::NetworkError("watch " + path_ + ": " + st.message());
  }
  return r;
}

}  // namespace nodevol::kube
