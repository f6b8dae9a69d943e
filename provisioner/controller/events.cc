#include "controller/events.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "kube/api.h"
#include "kube/fields.h"

namespace nodevol::provisioner {

using kube::Str;

namespace {

// Bounded, like client-go's LRU of 4096: beyond it repeats start new events.
constexpr size_t kMaxSeen = 4096;

}  // namespace

bool EventRecorder::Allow(const std::string& object_key) {
  std::lock_guard<std::mutex> lock(mu_);
  const Clock::TimePoint now = clock_->Now();
  auto it = buckets_.find(object_key);
  if (it == buckets_.end()) {
    if (buckets_.size() >= kMaxSeen) buckets_.clear();
    it = buckets_.emplace(object_key, Bucket{static_cast<double>(kSpamBurst), now}).first;
  }
  Bucket& b = it->second;
  b.tokens = std::min<double>(kSpamBurst, b.tokens + std::chrono::duration<double>(now - b.last) /
                                                         std::chrono::duration<double>(kSpamRefill));
  b.last = now;
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

std::string NowRfc3339() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

ObjectRef ObjectRef::Of(const nlohmann::json& object) {
  const auto& meta = kube::Obj(object, "metadata");
  return {Str(object, "kind"), Str(object, "apiVersion"), Str(meta, "namespace"),
          Str(meta, "name"),   Str(meta, "uid"),          Str(meta, "resourceVersion")};
}

EventRecorder::EventRecorder(kube::Api* client, std::string component, const Clock* clock, bool async)
    : client_(client), component_(std::move(component)), clock_(clock) {
  if (async && client_) sender_ = std::thread([this] { SenderLoop(); });
}

EventRecorder::~EventRecorder() {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stop_ = true;
  }
  queue_cv_.notify_all();
  if (sender_.joinable()) sender_.join();
}

void EventRecorder::Flush() {
  std::unique_lock<std::mutex> lock(queue_mu_);
  queue_cv_.wait(lock, [this] { return (queue_.empty() && !sending_) || !sender_.joinable(); });
}

void EventRecorder::SenderLoop() {
  std::unique_lock<std::mutex> lock(queue_mu_);
  for (;;) {
    queue_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) {
      // Shutting down is not held up by an apiserver that does not answer
      // (client-go's broadcaster drops what is queued, too).
      if (!queue_.empty()) spdlog::info("events: {} not written at shutdown", queue_.size());
      queue_.clear();
      queue_cv_.notify_all();
      return;
    }
    Pending e = std::move(queue_.front());
    queue_.pop_front();
    sending_ = true;
    lock.unlock();
    Send(e);
    lock.lock();
    sending_ = false;
    queue_cv_.notify_all();
  }
}

void EventRecorder::Record(const ObjectRef& object, const std::string& type, const std::string& reason,
                           const std::string& message) {
  const std::string& kind = object.kind;
  const std::string& name = object.name;
  const std::string& uid = object.uid;
  // Cluster-scoped objects (PVs) get their events in "default", as kubectl expects.
  std::string ns = object.ns.empty() ? "default" : object.ns;
  spdlog::log(type == "Warning" ? spdlog::level::warn : spdlog::level::info, "event {} {} {}/{}: {}", reason, kind,
              ns, name, message);
  if (!client_) return;
  if (!Allow(kind + "\x1f" + ns + "\x1f" + name + "\x1f" + uid)) {
    spdlog::debug("event {} for {}/{} not sent: more than {} for this object recently", reason, ns, name,
                  kSpamBurst);
    return;
  }
  Pending e{object, type, reason, message, NowRfc3339()};
  if (!sender_.joinable()) return Send(e);
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (queue_.size() >= kMaxQueued) {
      if (dropped_++ % 100 == 0)
        spdlog::warn("events: {} waiting to be written; dropping {} for {}/{} ({} dropped so far)", queue_.size(),
                     reason, ns, name, dropped_);
      return;
    }
    queue_.push_back(std::move(e));
  }
  queue_cv_.notify_all();
}

void EventRecorder::Send(const Pending& e) {
  const ObjectRef& object = e.object;
  const std::string& kind = object.kind;
  const std::string& name = object.name;
  const std::string& uid = object.uid;
  const std::string& type = e.type;
  const std::string& reason = e.reason;
  const std::string& message = e.message;
  const std::string& now = e.time;
  std::string ns = object.ns.empty() ? "default" : object.ns;
  std::string key = uid + "\x1f" + type + "\x1f" + reason + "\x1f" + message;
  std::string events = "/api/v1/namespaces/" + ns + "/events";
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = seen_.find(key);
    if (it != seen_.end()) {
      Seen s = it->second;
      s.count++;
      it->second.count = s.count;
      lock.unlock();
      nlohmann::json patch = {{"count", s.count}, {"lastTimestamp", now}};
      auto r = client_->MergePatch(events + "/" + s.name, patch);
      if (r.ok()) return;
      spdlog::debug("event {}/{}: update failed ({}), recording a new one", s.ns, s.name, r.ToString());
      lock.lock();
      seen_.erase(key);
    }
  }
  char suffix[24];
  std::snprintf(suffix, sizeof suffix, ".%llx",
                static_cast<unsigned long long>(std::chrono::system_clock::now().time_since_epoch().count()));
  std::string event_name = name + suffix;
  nlohmann::json involved = {{"kind", kind}, {"apiVersion", object.api_version}, {"name", name},
                             {"uid", uid}, {"resourceVersion", object.resource_version}};
  if (!object.ns.empty()) involved["namespace"] = object.ns;
  nlohmann::json event = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"name", event_name}, {"namespace", ns}}},
      {"involvedObject", involved},
      {"reason", reason},
      {"message", message.size() > 1024 ? message.substr(0, 1021) + "..." : message},
      {"type", type},
      {"source", {{"component", component_}}},
      {"firstTimestamp", now},
      {"lastTimestamp", now},
      {"count", 1},
      {"reportingComponent", component_},
  };
  auto r = client_->Create(events, event);
  if (!r.ok()) {
    spdlog::warn("event {} for {}/{} not recorded: {}", reason, ns, name, r.ToString());
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (seen_.size() >= kMaxSeen) seen_.clear();
  seen_[key] = Seen{ns, event_name, 1};
}

}  // namespace nodevol::provisioner
