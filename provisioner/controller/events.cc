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

// The progress event an outcome supersedes, or "".
const char* Supersedes(const std::string& reason) {
  if (reason == "ProvisioningSucceeded" || reason == "ProvisioningFailed") return "Provisioning";
  if (reason == "VolumeResizeSuccessful" || reason == "VolumeResizeFailed") return "Resizing";
  return "";
}

bool IsProgress(const std::string& reason) { return reason == "Provisioning" || reason == "Resizing"; }

std::string ProgressKey(const std::string& uid, const std::string& reason) { return uid + "\x1f" + reason; }

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
  if (dropped_ > 0) spdlog::warn("events: {} dropped in all, the queue being full", dropped_);
  if (superseded_ > 0) spdlog::info("events: {} progress events not sent, their outcome following", superseded_);
}

void EventRecorder::Flush() {
  std::unique_lock<std::mutex> lock(queue_mu_);
  ++flushing_;
  queue_cv_.notify_all();
  queue_cv_.wait(lock, [this] { return (queue_.empty() && !sending_) || !sender_.joinable(); });
  --flushing_;
}

void EventRecorder::DeferWhile(std::function<bool()> busy, std::chrono::milliseconds max) {
  std::unique_lock<std::mutex> lock(queue_mu_);
  // The old predicate may be running on the sender: once this returns, it
  // is never called again (an owner clears it before it is destroyed).
  queue_cv_.wait(lock, [this] { return !in_busy_; });
  busy_ = std::move(busy);
  max_defer_ = max;
  queue_cv_.notify_all();
}

void EventRecorder::WaitWhileDeferred(std::unique_lock<std::mutex>& lock) {
  // How often a deferred event looks at busy() again: the end of a burst
  // is seen within this, and the sender costs nothing measurable.
  constexpr auto kRecheck = std::chrono::milliseconds(20);
  // Half the queue may wait: beyond that, deferring would end in drops.
  while (!stop_ && flushing_ == 0 && busy_ && !queue_.empty() && live_ < kMaxQueued / 2) {
    const auto due = queue_.front().recorded + max_defer_;
    if (std::chrono::steady_clock::now() >= due) return;
    // busy() takes the claim queue's lock: never call it under ours.
    std::function<bool()> busy = busy_;
    in_busy_ = true;
    lock.unlock();
    const bool wait = busy();
    lock.lock();
    in_busy_ = false;
    queue_cv_.notify_all();
    if (!wait) return;
    queue_cv_.wait_until(lock, std::min(due, std::chrono::steady_clock::now() + kRecheck));
  }
}

void EventRecorder::SenderLoop() {
  std::unique_lock<std::mutex> lock(queue_mu_);
  for (;;) {
    queue_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    WaitWhileDeferred(lock);
    if (stop_) {
      // Shutting down is not held up by an apiserver that does not answer
      // (client-go's broadcaster drops what is queued, too).
      if (live_ > 0) spdlog::info("events: {} not written at shutdown", live_);
      queue_.clear();
      progress_.clear();
      live_ = 0;
      queue_cv_.notify_all();
      return;
    }
    if (queue_.front().superseded) {
      queue_.pop_front();
      queue_cv_.notify_all();
      continue;
    }
    Pending e = std::move(queue_.front());
    if (auto it = progress_.find(ProgressKey(e.object.uid, e.reason)); it != progress_.end() && it->second == &queue_.front())
      progress_.erase(it);
    queue_.pop_front();
    --live_;
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
  Pending e{object, type, reason, message, NowRfc3339(), std::chrono::steady_clock::now()};
  if (!sender_.joinable()) return Send(e);
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (const std::string sup = Supersedes(reason); !sup.empty()) {
      if (auto it = progress_.find(ProgressKey(uid, sup)); it != progress_.end()) {
        it->second->superseded = true;
        progress_.erase(it);
        --live_;
        ++superseded_;
      }
    }
    if (live_ >= kMaxQueued) {
      if (dropped_++ % 100 == 0)
        spdlog::warn("events: {} waiting to be written; dropping {} for {}/{} ({} dropped so far)", live_,
                     reason, ns, name, dropped_);
      return;
    }
    const bool progress = IsProgress(reason);
    queue_.push_back(std::move(e));
    ++live_;
    if (progress) progress_[ProgressKey(uid, reason)] = &queue_.back();
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
