// Informer: a reflector and cache for one collection, like client-go's
// SharedInformer with one set of handlers.
//
// A reflector thread lists, then watches from the list's resourceVersion,
// keeping a cache keyed "namespace/name" (or "name" for cluster-scoped
// objects). A watch that ends normally resumes from the last resourceVersion
// seen (bookmarks advance it). 410 Expired/Gone, as an HTTP status or an
// ERROR event, means relist: the cache is replaced and deletes are
// synthesized for objects that vanished, updates for those that changed.
// Network errors, 429 and 5xx back off 0.8 s doubling to 30 s, jittered
// (at least Retry-After), and so does a watch that ends at once with no
// event; any other watch failure relists at the last version synced, never
// older. Handlers run on one dispatcher thread, in order,
// never with a lock held, so they may call Get/List. HasSynced() turns true
// once the first list's adds have been delivered. With a resync period, every
// cached object is redelivered as OnUpdate(obj, obj) that often.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "kube/backoff.h"
#include "kube/list_watcher.h"

namespace nodevol::kube {

struct InformerHandlers {
  std::function<void(const nlohmann::json& obj)> on_add;
  std::function<void(const nlohmann::json& old_obj, const nlohmann::json& new_obj)> on_update;
  // The last state known: the DELETED event's object, or the cached object
  // when the delete was inferred from a relist.
  std::function<void(const nlohmann::json& obj)> on_delete;
};

struct InformerOptions {
  std::string name;  // for logs, e.g. "persistentvolumeclaims"
  std::chrono::milliseconds resync{0};  // 0: no periodic resync
  std::chrono::milliseconds backoff_initial{800};
  std::chrono::milliseconds backoff_cap{30000};
  // Applied to every object before it is cached or handed out, e.g. to drop
  // metadata.managedFields (a large share of an object's bytes) when many
  // objects are cached. Called on the reflector thread.
  std::function<void(nlohmann::json& obj)> transform;
};

// A transform for InformerOptions: removes metadata.managedFields.
void DropManagedFields(nlohmann::json& obj);

class Informer {
 public:
  Informer(std::unique_ptr<ListWatcher> source, InformerHandlers handlers, InformerOptions options);
  ~Informer();  // Stop()s
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  void Start();
  // Returns once both threads have ended (a watch in flight is cancelled).
  void Stop();

  bool HasSynced() const { return synced_.load(); }
  // Waits until HasSynced() or `timeout`; false on timeout or Stop.
  bool WaitForSync(std::chrono::milliseconds timeout);

  std::optional<nlohmann::json> Get(const std::string& key) const;
  std::vector<nlohmann::json> List() const;
  // The resourceVersion the next watch would start from.
  std::string LastResourceVersion() const;
  // How many successful lists so far (1 after the first sync; more after 410s).
  uint64_t list_count() const { return list_count_.load(); }

  // "namespace/name", or "name" when the object has no namespace.
  static std::string KeyOf(const nlohmann::json& obj);

 private:
  struct Notification {
    enum class Kind { kAdd, kUpdate, kDelete, kSynced } kind;
    nlohmann::json old_obj, new_obj;
  };

  void ReflectorLoop();
  void DispatchLoop();
  // Installs a fresh list and queues the differences as notifications.
  void Replace(std::vector<nlohmann::json> items, const std::string& rv);
  bool HandleEvent(WatchEvent e);
  void Push(std::vector<Notification> n);
  // Sleeps `d` unless stopped first; false when stopped.
  bool SleepFor(std::chrono::milliseconds d);

  std::unique_ptr<ListWatcher> source_;
  const InformerHandlers handlers_;
  const InformerOptions options_;

  mutable std::mutex mu_;  // guards cache_, rv_
  std::map<std::string, nlohmann::json> cache_;
  std::string rv_;

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;  // also wakes sleeps on Stop
  std::deque<Notification> queue_;

  std::atomic<bool> stop_{false};
  std::atomic<bool> synced_{false};
  std::atomic<uint64_t> list_count_{0};
  bool sync_marker_sent_ = false;  // reflector thread only
  std::thread reflector_, dispatcher_;
};

}  // namespace nodevol::kube
