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
// The queue holds at most kMaxQueued (client-go: 1000); beyond that events
// are logged and dropped. Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
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
  static constexpr size_t kMaxQueued = 1000;

  EventRecorder(kube::Api* client, std::string component, const Clock* clock = Clock::Real(), bool async = false);
  // Stops the sender; events still queued are dropped (logged).
  ~EventRecorder();
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // Returns once every event recorded so far has been written (or failed).
  void Flush();

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
  };
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
  std::deque<Pending> queue_;
  bool sending_ = false, stop_ = false;
  uint64_t dropped_ = 0;
  std::thread sender_;
};

// RFC 3339 UTC with seconds ("2026-11-21T16:00:00Z"), Events' Time format.
std::string NowRfc3339();

}  // namespace nodevol::provisioner
