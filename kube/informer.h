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
//
// TypedInformer<T> caches what `decode` makes of each object, once per
// version it sees, not the object: a controller caching thousands of
// claims keeps the few fields it reads (a JSON tree of a whole object
// costs tens of KiB). Cached values are shared and immutable: Get and List
// hand out pointers, never copies. Informer caches whole JSON objects
// (after options.transform).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/backoff.h"
#include "kube/list_watcher.h"

namespace nodevol::kube {

struct InformerOptions {
  std::string name;  // for logs, e.g. "persistentvolumeclaims"
  std::chrono::milliseconds resync{0};  // 0: no periodic resync
  std::chrono::milliseconds backoff_initial{800};
  std::chrono::milliseconds backoff_cap{30000};
  // Applied to every object before it is decoded, e.g. to drop
  // metadata.managedFields (a large share of an object's bytes) when whole
  // objects are cached. Called on the reflector thread.
  std::function<void(nlohmann::json& obj)> transform;
  // After a list, hand the freed pages of its decoding back to the system
  // (malloc_trim): the list's JSON is transient, its peak need not stay
  // resident for the process's life.
  bool trim_after_list = true;
};

// A transform for InformerOptions: removes metadata.managedFields.
void DropManagedFields(nlohmann::json& obj);

// "namespace/name", or "name" when the object has no namespace.
std::string KeyOf(const nlohmann::json& obj);

// The reflector and the cache, over type-erased values (see TypedInformer).
class InformerCore {
 public:
  using Value = std::shared_ptr<const void>;
  using Decode = std::function<Value(nlohmann::json&& obj)>;
  struct Handlers {
    std::function<void(const Value&)> on_add;
    std::function<void(const Value& old_value, const Value& new_value)> on_update;
    std::function<void(const Value&)> on_delete;
  };

  InformerCore(std::unique_ptr<ListWatcher> source, Handlers handlers, InformerOptions options, Decode decode);
  ~InformerCore();  // Stop()s
  InformerCore(const InformerCore&) = delete;
  InformerCore& operator=(const InformerCore&) = delete;

  void Start();
  void Stop();
  bool HasSynced() const { return synced_.load(); }
  bool WaitForSync(std::chrono::milliseconds timeout);
  Value Get(const std::string& key) const;  // null when absent
  std::vector<Value> List() const;          // in key order
  size_t Size() const;
  std::string LastResourceVersion() const;
  uint64_t list_count() const { return list_count_.load(); }

 private:
  struct Entry {
    std::string rv;
    Value value;
  };
  struct Notification {
    enum class Kind { kAdd, kUpdate, kDelete, kSynced } kind;
    Value old_value, new_value;
  };

  Entry Make(nlohmann::json&& obj, std::string* key);
  void ReflectorLoop();
  void DispatchLoop();
  // Installs a fresh list and queues the differences as notifications.
  void Replace(std::map<std::string, Entry> fresh, const std::string& rv);
  bool HandleEvent(WatchEvent e);
  void Push(std::vector<Notification> n);
  // Sleeps `d` unless stopped first; false when stopped.
  bool SleepFor(std::chrono::milliseconds d);

  std::unique_ptr<ListWatcher> source_;
  const Handlers handlers_;
  const InformerOptions options_;
  const Decode decode_;

  mutable std::mutex mu_;  // guards cache_, rv_
  std::map<std::string, Entry> cache_;
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

// What every informer does, whatever it caches: for code that starts,
// stops and waits for several.
class InformerControl {
 public:
  virtual ~InformerControl() = default;
  virtual void Start() = 0;
  // Returns once both threads have ended (a watch in flight is cancelled).
  virtual void Stop() = 0;
  virtual bool HasSynced() const = 0;
  // Waits until HasSynced() or `timeout`; false on timeout or Stop.
  virtual bool WaitForSync(std::chrono::milliseconds timeout) = 0;
};

template <typename T>
class TypedInformer : public InformerControl {
 public:
  using Ptr = std::shared_ptr<const T>;
  using Decode = std::function<T(const nlohmann::json& obj)>;
  struct Handlers {
    std::function<void(const T& obj)> on_add;
    std::function<void(const T& old_obj, const T& new_obj)> on_update;
    // The last state known: the DELETED event's object, or the cached one
    // when the delete was inferred from a relist.
    std::function<void(const T& obj)> on_delete;
  };

  // `decode` may be omitted only for T = nlohmann::json (the object itself).
  TypedInformer(std::unique_ptr<ListWatcher> source, Handlers handlers, InformerOptions options,
                Decode decode = nullptr)
      : core_(std::move(source), Erase(std::move(handlers)), std::move(options), Erase(std::move(decode))) {}

  void Start() override { core_.Start(); }
  void Stop() override { core_.Stop(); }
  bool HasSynced() const override { return core_.HasSynced(); }
  bool WaitForSync(std::chrono::milliseconds timeout) override { return core_.WaitForSync(timeout); }
  Ptr Get(const std::string& key) const { return std::static_pointer_cast<const T>(core_.Get(key)); }
  std::vector<Ptr> List() const {
    std::vector<Ptr> out;
    for (auto& v : core_.List()) out.push_back(std::static_pointer_cast<const T>(std::move(v)));
    return out;
  }
  size_t Size() const { return core_.Size(); }
  // The resourceVersion the next watch would start from.
  std::string LastResourceVersion() const { return core_.LastResourceVersion(); }
  // How many successful lists so far (1 after the first sync; more after 410s).
  uint64_t list_count() const { return core_.list_count(); }

  static std::string KeyOf(const nlohmann::json& obj) { return kube::KeyOf(obj); }

 private:
  static const T& As(const InformerCore::Value& v) { return *static_cast<const T*>(v.get()); }
  static InformerCore::Handlers Erase(Handlers h) {
    InformerCore::Handlers out;
    if (h.on_add) out.on_add = [f = std::move(h.on_add)](const InformerCore::Value& v) { f(As(v)); };
    if (h.on_update)
      out.on_update = [f = std::move(h.on_update)](const InformerCore::Value& a, const InformerCore::Value& b) {
        f(As(a), As(b));
      };
    if (h.on_delete) out.on_delete = [f = std::move(h.on_delete)](const InformerCore::Value& v) { f(As(v)); };
    return out;
  }
  static InformerCore::Decode Erase(Decode d) {
    if (!d) {
      if constexpr (std::is_same_v<T, nlohmann::json>) {
        return [](nlohmann::json&& obj) -> InformerCore::Value {
          return std::make_shared<const nlohmann::json>(std::move(obj));
        };
      } else {
        throw std::invalid_argument("a TypedInformer of a type other than json needs a decode function");
      }
    }
    return [f = std::move(d)](nlohmann::json&& obj) -> InformerCore::Value { return std::make_shared<const T>(f(obj)); };
  }

  InformerCore core_;
};

using Informer = TypedInformer<nlohmann::json>;
using InformerHandlers = Informer::Handlers;

}  // namespace nodevol::kube
