// MemoryLeaseStore: a LeaseStore in memory with the apiserver's
// optimistic concurrency (a counter as resourceVersion), for tests and for
// running a single replica without an apiserver. Thread-safe. Tests can make
// it fail (Unavailable) and run a hook just before an Update is applied, to
// interleave a competitor exactly there.
#pragma once

#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "leader/lease_store.h"

namespace nodevol::leader {

class MemoryLeaseStore : public LeaseStore {
 public:
  Status Get(LeaseRecord* record, std::string* resource_version) override;
  Status Create(const LeaseRecord& record, std::string* resource_version) override;
  Status Update(const LeaseRecord& record, const std::string& resource_version,
                std::string* new_resource_version) override;
  // Recorded (last_call_timeout) for tests; memory calls take no time.
  void SetCallTimeout(Clock::Duration limit) override;
  std::string Describe() const override { return "memory/lease"; }
  Clock::Duration last_call_timeout() const;

  // Every call fails with UNAVAILABLE while set.
  void SetUnavailable(bool unavailable);
  // Runs (once, without the store's lock) at the start of the next Update.
  void BeforeNextUpdate(std::function<void()> hook);
  // The stored record, if any.
  std::optional<LeaseRecord> record() const;
  // Writes `record` directly (a new resourceVersion), as another client would.
  void Put(const LeaseRecord& record);

 private:
  mutable std::mutex mu_;
  std::optional<LeaseRecord> record_;
  long version_ = 0;
  bool unavailable_ = false;
  std::function<void()> before_update_;
  Clock::Duration last_call_timeout_{};
};

}  // namespace nodevol::leader
