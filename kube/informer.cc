#include "kube/informer.h"

#include <malloc.h>

#include <spdlog/spdlog.h>

// Under AddressSanitizer or ThreadSanitizer, malloc is the sanitizer's and
// glibc's malloc_trim works on arenas glibc never handed out: it can
// crash, or leave a thread's arena count wrong so that glibc aborts when
// the thread exits ("__malloc_arena_thread_freeres: a->attached_threads
// > 0", seen once in the ASan tree; google/sanitizers#1721). Nothing to
// trim there anyway.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NODEVOL_SANITIZED_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define NODEVOL_SANITIZED_MALLOC 1
#endif
#endif
#ifdef NODEVOL_SANITIZED_MALLOC
constexpr bool kTrimWorks = false;
#else
constexpr bool kTrimWorks = true;
#endif

namespace nodevol::kube {
namespace {

std::string ResourceVersionOf(const nlohmann::json& obj) {
  return obj.value("/metadata/resourceVersion"_json_pointer, std::string());
}

}  // namespace

void DropManagedFields(nlohmann::json& obj) {
  if (auto md = obj.find("metadata"); md != obj.end() && md->is_object()) md->erase("managedFields");
}

std::string KeyOf(const nlohmann::json& obj) {
  std::string ns = obj.value("/metadata/namespace"_json_pointer, std::string());
  std::string name = obj.value("/metadata/name"_json_pointer, std::string());
  return ns.empty() ? name : ns + "/" + name;
}

InformerCore::InformerCore(std::unique_ptr<ListWatcher> source, Handlers handlers, InformerOptions options,
                           Decode decode)
    : source_(std::move(source)),
      handlers_(std::move(handlers)),
      options_(std::move(options)),
      decode_(std::move(decode)) {}

InformerCore::~InformerCore() { Stop(); }

void InformerCore::Start() {
  stop_ = false;
  dispatcher_ = std::thread([this] { DispatchLoop(); });
  reflector_ = std::thread([this] { ReflectorLoop(); });
}

void InformerCore::Stop() {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stop_ = true;
  }
  queue_cv_.notify_all();
  if (reflector_.joinable()) reflector_.join();
  if (dispatcher_.joinable()) dispatcher_.join();
}

bool InformerCore::WaitForSync(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(queue_mu_);
  queue_cv_.wait_for(lock, timeout, [this] { return synced_.load() || stop_.load(); });
  return synced_.load();
}

InformerCore::Value InformerCore::Get(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(key);
  return it == cache_.end() ? nullptr : it->second.value;
}

std::vector<InformerCore::Value> InformerCore::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Value> out;
  out.reserve(cache_.size());
  for (const auto& [key, e] : cache_) out.push_back(e.value);
  return out;
}

size_t InformerCore::Size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

std::string InformerCore::LastResourceVersion() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rv_;
}

bool InformerCore::SleepFor(std::chrono::milliseconds d) {
  std::unique_lock<std::mutex> lock(queue_mu_);
  return !queue_cv_.wait_for(lock, d, [this] { return stop_.load(); });
}

void InformerCore::Push(std::vector<Notification> n) {
  if (n.empty()) return;
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    for (auto& x : n) queue_.push_back(std::move(x));
  }
  queue_cv_.notify_all();
}

InformerCore::Entry InformerCore::Make(nlohmann::json&& obj, std::string* key) {
  if (options_.transform) options_.transform(obj);
  *key = KeyOf(obj);
  Entry e;
  e.rv = ResourceVersionOf(obj);
  e.value = decode_(std::move(obj));
  return e;
}

void InformerCore::Replace(std::map<std::string, Entry> fresh, const std::string& rv) {
  std::vector<Notification> n;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, old_e] : cache_) {
      auto it = fresh.find(key);
      if (it == fresh.end()) {
        n.push_back({Notification::Kind::kDelete, old_e.value, nullptr});
      } else if (it->second.rv != old_e.rv) {
        n.push_back({Notification::Kind::kUpdate, old_e.value, it->second.value});
      }
    }
    for (const auto& [key, e] : fresh) {
      if (cache_.count(key) == 0) n.push_back({Notification::Kind::kAdd, nullptr, e.value});
    }
    cache_ = std::move(fresh);
    rv_ = rv;
  }
  if (!sync_marker_sent_) {
    n.push_back({Notification::Kind::kSynced, nullptr, nullptr});
    sync_marker_sent_ = true;
  }
  Push(std::move(n));
}

bool InformerCore::HandleEvent(WatchEvent e) {
  std::string rv = e.ResourceVersion();
  std::vector<Notification> n;
  std::string key;
  Entry fresh;
  if (e.type == WatchEvent::Type::kAdded || e.type == WatchEvent::Type::kModified ||
      e.type == WatchEvent::Type::kDeleted)
    fresh = Make(std::move(e.object), &key);
  {
    std::lock_guard<std::mutex> lock(mu_);
    switch (e.type) {
      case WatchEvent::Type::kAdded:
      case WatchEvent::Type::kModified: {
        auto it = cache_.find(key);
        if (it == cache_.end()) {
          n.push_back({Notification::Kind::kAdd, nullptr, fresh.value});
          cache_.emplace(key, std::move(fresh));
        } else {
          n.push_back({Notification::Kind::kUpdate, it->second.value, fresh.value});
          it->second = std::move(fresh);
        }
        break;
      }
      case WatchEvent::Type::kDeleted: {
        auto it = cache_.find(key);
        if (it != cache_.end()) cache_.erase(it);
        n.push_back({Notification::Kind::kDelete, fresh.value, nullptr});
        break;
      }
      case WatchEvent::Type::kBookmark:
      case WatchEvent::Type::kError:  // handled by the watch, never passed here
        break;
    }
    if (!rv.empty()) rv_ = rv;
  }
  Push(std::move(n));
  return !stop_.load();
}

void InformerCore::ReflectorLoop() {
  Backoff backoff(options_.backoff_initial, options_.backoff_cap);
  bool need_list = true;
  // The first list may come from the watch cache; a relist after 410 must
  // not go back in time, so it reads from etcd (as client-go).
  std::string list_rv = "0";
  int expired_in_a_row = 0;
  const std::string& name = options_.name;
  while (!stop_.load()) {
    if (need_list) {
      // Each item is decoded as its page arrives: the list's JSON is never
      // all in memory at once.
      std::map<std::string, Entry> fresh;
      std::string rv;
      Result r = source_->List(
          list_rv,
          [&](nlohmann::json&& item) {
            std::string key;
            Entry e = Make(std::move(item), &key);
            fresh[key] = std::move(e);
          },
          [&] { fresh.clear(); }, &rv);
      if (stop_.load()) break;
      if (!r.ok()) {
        auto delay = std::max<std::chrono::milliseconds>(backoff.Next(), r.retry_after());
        spdlog::warn("informer {}: list failed, retrying in {} ms: {}", name, delay.count(), r.ToString());
        if (r.code() == Result::Code::kExpired) list_rv = "";
        SleepFor(delay);
        continue;
      }
      Replace(std::move(fresh), rv);
      list_count_++;
      if (options_.trim_after_list && kTrimWorks) malloc_trim(0);
      spdlog::debug("informer {}: listed at resourceVersion {}", name, rv);
      need_list = false;
    }
    std::string from = LastResourceVersion();
    bool got_event = false;
    const auto watch_start = std::chrono::steady_clock::now();
    Result r = source_->Watch(
        from,
        [&](const WatchEvent& e) {
          got_event = true;
          return HandleEvent(e);
        },
        &stop_);
    if (stop_.load()) break;
    if (got_event) {
      backoff.Reset();
      expired_in_a_row = 0;
    }
    switch (r.code()) {
      case Result::Code::kOk:
        // The server ended the watch at its timeout: resume. One that ends
        // at once with nothing in it (a proxy closing idle streams, a
        // server that refuses quietly) would be a hot loop: back off.
        if (!got_event && std::chrono::steady_clock::now() - watch_start < std::chrono::seconds(1)) {
          auto delay = backoff.Next();
          spdlog::debug("informer {}: watch from {} ended at once, empty; resuming in {} ms", name, from,
                        delay.count());
          SleepFor(delay);
        }
        break;
      case Result::Code::kExpired:
        spdlog::info("informer {}: resourceVersion {} expired, relisting: {}", name, from, r.message());
        need_list = true;
        list_rv = "";
        // A relist that is itself expired at once would loop: back off then.
        if (++expired_in_a_row > 1) SleepFor(backoff.Next());
        break;
      case Result::Code::kNetworkError:
      case Result::Code::kTooManyRequests:
      case Result::Code::kServerError:
      case Result::Code::kCancelled: {
        auto delay = std::max<std::chrono::milliseconds>(backoff.Next(), r.retry_after());
        spdlog::warn("informer {}: watch failed, resuming from {} in {} ms: {}", name, from, delay.count(),
                     r.ToString());
        SleepFor(delay);
        break;
      }
      default: {
        // Forbidden, NotFound, a malformed stream: start over with a list,
        // at the version we had synced (not "0": the watch cache may lag
        // behind it, and the cache must never go back in time).
        auto delay = backoff.Next();
        spdlog::warn("informer {}: watch failed, relisting in {} ms: {}", name, delay.count(), r.ToString());
        need_list = true;
        if (!from.empty()) list_rv = from;
        SleepFor(delay);
        break;
      }
    }
  }
}

void InformerCore::DispatchLoop() {
  using Clock = std::chrono::steady_clock;
  auto next_resync = Clock::now() + options_.resync;
  for (;;) {
    Notification n;
    bool resync = false;
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      auto ready = [this] { return stop_.load() || !queue_.empty(); };
      if (options_.resync.count() > 0) {
        queue_cv_.wait_until(lock, next_resync, ready);
      } else {
        queue_cv_.wait(lock, ready);
      }
      if (stop_.load()) return;
      if (!queue_.empty()) {
        n = std::move(queue_.front());
        queue_.pop_front();
      } else if (options_.resync.count() > 0 && Clock::now() >= next_resync) {
        resync = true;
      } else {
        continue;
      }
    }
    if (resync) {
      next_resync = Clock::now() + options_.resync;
      if (!synced_.load() || !handlers_.on_update) continue;
      for (const auto& v : List()) {
        if (stop_.load()) return;
        handlers_.on_update(v, v);
      }
      continue;
    }
    switch (n.kind) {
      case Notification::Kind::kAdd:
        if (handlers_.on_add) handlers_.on_add(n.new_value);
        break;
      case Notification::Kind::kUpdate:
        if (handlers_.on_update) handlers_.on_update(n.old_value, n.new_value);
        break;
      case Notification::Kind::kDelete:
        if (handlers_.on_delete) handlers_.on_delete(n.old_value);
        break;
      case Notification::Kind::kSynced: {
        std::lock_guard<std::mutex> lock(queue_mu_);
        synced_ = true;
        queue_cv_.notify_all();
        break;
      }
    }
  }
}

}  // namespace nodevol::kube
