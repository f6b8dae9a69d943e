// EventRecorder: core/v1 Events about claims and volumes, as kubectl
// describe shows them (provisioner-contract.md §2). A repeat of the same
// (object, type, reason, message) updates the earlier event's count and
// lastTimestamp instead of adding one, as client-go's correlator does, so a
// retrying claim does not flood the namespace. And as client-go's spam
// filter does, each object has a token bucket (burst 25, one token back
// every 5 minutes): events beyond it, new or repeated, are only logged, so
// a claim failing for hours costs the apiserver a few writes an hour.
// Failures to record are
// logged, never returned: an event is never worth failing the operation.
//
// With `async`, as client-go's broadcaster, Record only queues: one sender
// thread writes the events, so a worker's pass does not wait on two
// apiserver round trips for its Provisioning and ProvisioningSucceeded.
// An outcome supersedes its object's progress event while that one still
// waits in the queue (ProvisioningSucceeded or ProvisioningFailed the
// Provisioning, VolumeResizeSuccessful or VolumeResizeFailed the
// Resizing): in a burst the sender falls behind, and "provisioning" is
// not news once "provisioned" is queued behind it. The queue holds at most
// kMaxQueued events (client-go: 1000, which a burst of 1,000 claims
// overflowed: 562 of 2,000 events dropped); beyond that events are logged
// and dropped. Thread-safe.
//
// DeferWhile(busy, max): the sender holds an event back while busy() says
// there is claim work waiting, for at most `max` after it was recorded.
// Events and PVs are written to the same apiserver; in a burst, a PV
// saved sooner is worth more than an event seen sooner (kubectl describe
// shows it a few seconds later). It moves the events' writes after a
// short burst rather than saving them: in a burst longer than `max` they
// trail by `max` and are written as fast as before.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/clock.h"

namespace nodevol::kube {
class Api;
}

namespace nodevol::provisioner {

// The object an event is about: what involvedObject names.
struct ObjectRef {
  std::string kind, api_version, ns, name, uid, resource_version;
  // From an object's JSON (kind, apiVersion, metadata).
  static ObjectRef Of(const nlohmann::json& object);
};

class EventRecorder {
 public:
  static constexpr int kSpamBurst = 25;
  static constexpr std::chrono::seconds kSpamRefill{300};
  // About 500 bytes each: at most 2 MiB queued.
  static constexpr size_t kMaxQueued = 4096;

  EventRecorder(kube::Api* client, std::string component, const Clock* clock = Clock::Real(), bool async = false);
  // Stops the sender; events still queued are dropped (logged).
  ~EventRecorder();
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // Returns once every event recorded so far has been written (or failed),
  // deferred ones included.
  void Flush();

  // See above. `busy` must not call Record. DeferWhile(nullptr, {}) ends
  // deferring, and returns once `busy` is no longer running.
  void DeferWhile(std::function<bool()> busy, std::chrono::milliseconds max);

  // `type`: "Normal" or "Warning".
  void Record(const ObjectRef& object, const std::string& type, const std::string& reason,
              const std::string& message);
  void Record(const nlohmann::json& object, const std::string& type, const std::string& reason,
              const std::string& message) {
    Record(ObjectRef::Of(object), type, reason, message);
  }

 private:
  struct Seen {
    std::string ns, name;
    int count = 0;
  };
  struct Bucket {
    double tokens = kSpamBurst;
    Clock::TimePoint last{};
  };
  struct Pending {
    ObjectRef object;
    std::string type, reason, message, time;
    std::chrono::steady_clock::time_point recorded;
    bool superseded = false;  // its outcome was recorded: never sent
  };
  // With queue_mu_ held by `lock`: waits while the oldest event may still
  // be deferred (or until stop_).
  void WaitWhileDeferred(std::unique_lock<std::mutex>& lock);
  // Takes a token from the object's bucket; false when it is empty.
  bool Allow(const std::string& object_key);
  // Writes one event, or a repeat's new count.
  void Send(const Pending& e);
  void SenderLoop();

  kube::Api* client_;
  std::string component_;
  const Clock* clock_;
  std::mutex mu_;
  std::map<std::string, Seen> seen_;  // correlation key -> event
  std::map<std::string, Bucket> buckets_;  // involved object -> spam filter

  // async: the queue and its sender.
  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<Pending> queue_;  // pointers to its elements stay valid (ends only)
  size_t live_ = 0;            // queued and not superseded
  // Progress events waiting in queue_, by object uid and reason.
  std::map<std::string, Pending*> progress_;
  uint64_t superseded_ = 0;
  bool sending_ = false, stop_ = false;
  int flushing_ = 0;  // Flush calls waiting: nothing is deferred meanwhile
  std::function<bool()> busy_;
  bool in_busy_ = false;  // the sender is calling busy_
  std::chrono::milliseconds max_defer_{0};
  uint64_t dropped_ = 0;
  std::thread sender_;
};

// RFC 3339 UTC with seconds ("2026-11-21T16:00:00Z"), Events' Time format.
std::string NowRfc3339();

}  // namespace nodevol::provisioner
