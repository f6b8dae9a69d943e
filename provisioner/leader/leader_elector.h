// LeaderElector: client-go's leader election on a Lease, step for step.
//
// Every retry period (jittered while acquiring) an elector tries to acquire
// or renew: a leader whose lease is still valid first PUTs its renewal
// blindly (fast path); otherwise it GETs the lease (creating it if missing).
// A lease held by someone else is taken only when the record has not changed
// for leaseDurationSeconds as measured by OUR monotonic clock since we first
// saw it that way (observedTime) - remote timestamps are never compared with
// the local clock, so skewed clocks cannot cause two leaders. Taking over
// writes us as holder, acquire/renew time now, leaseTransitions + 1; a
// Conflict means another candidate won. A leader that has not renewed within
// the renew deadline stops leading (leaseDuration > renewDeadline leaves
// the margin that keeps it from overlapping its successor): every request
// of a renewal is capped at the time left to that deadline, and a renewal
// answered after it counts as lost. A lost lease is never released (the
// successor waits it out while this replica stops acting); only Stop
// releases, with release_on_cancel.
//
// Callbacks run on the thread calling Run and must return promptly.
// Unlike client-go, OnStoppedLeading runs only if OnStartedLeading did.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>

#include "base/status.h"
#include "leader/lease_record.h"
#include "leader/lease_store.h"
#include "base/clock.h"

namespace nodevol::leader {

struct LeaderElectorConfig {
  std::string identity;  // unique per replica, e.g. "<pod name>_<uuid>"
  Clock::Duration lease_duration = std::chrono::seconds(15);
  Clock::Duration renew_deadline = std::chrono::seconds(10);
  Clock::Duration retry_period = std::chrono::seconds(2);
  // On Stop (not on a lost lease), a leader writes an empty holder with a
  // 1 s lease so a successor need not wait out the lease. Stop only once
  // the work the lease guards has stopped.
  bool release_on_cancel = false;
};

struct LeaderCallbacks {
  std::function<void()> on_started_leading = nullptr;
  std::function<void()> on_stopped_leading = nullptr;
  std::function<void(const std::string& identity)> on_new_leader = nullptr;  // "" after a release
};

class LeaderElector {
 public:
  // client-go's jitter factor for the acquire loop: waits are in
  // [retry, retry * 2.2).
  static constexpr double kJitterFactor = 1.2;

  // INVALID_ARGUMENT unless identity is set and
  // lease_duration > renew_deadline > kJitterFactor * retry_period > 0
  // (CheckTimings: the part a command line sets).
  static Status CheckTimings(const LeaderElectorConfig& config);
  static Status New(LeaseStore* store, const Clock* clock, LeaderElectorConfig config, LeaderCallbacks callbacks,
                    std::unique_ptr<LeaderElector>* out);

  // Acquires, calls on_started_leading, renews until the renew deadline is
  // missed or Stop is called, then calls on_stopped_leading (after a
  // release, if stopped with release_on_cancel). Returns at once if Stop
  // was already called.
  void Run();
  // Makes Run return soon; thread-safe, idempotent.
  void Stop();

  // One attempt to acquire or renew; true if we hold the lease now. What Run
  // does each period; public so tests can step the algorithm.
  bool TryAcquireOrRenew();
  // Gives the lease up if we hold it (see release_on_cancel).
  bool Release();

  bool IsLeader() const;
  // The holder in the last record we saw.
  std::string Leader() const;

 private:
  LeaderElector(LeaseStore* store, const Clock* clock, LeaderElectorConfig config, LeaderCallbacks callbacks);

  bool IsLeaderLocked() const;
  bool IsLeaseValidLocked(Clock::TimePoint now) const;
  void SetObservedLocked(const LeaseRecord& record);
  void MaybeReportTransition();
  // Waits until `deadline` or Stop; returns false if stopped.
  bool SleepUntil(Clock::TimePoint deadline);
  // Gives the store the time left to the renew deadline for its next call;
  // false once none is left.
  bool LimitNextCall();
  void SetRenewDeadline(std::optional<Clock::TimePoint> deadline);
  Clock::Duration Jittered(Clock::Duration d);

  LeaseStore* const store_;
  const Clock* const clock_;
  const LeaderElectorConfig config_;
  const LeaderCallbacks callbacks_;

  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stopped_ = false;
  LeaseRecord observed_;                 // last record seen or written
  Clock::TimePoint observed_time_{};     // our clock when it last changed
  std::string resource_version_;         // of the last record seen or written
  std::optional<Clock::TimePoint> renew_deadline_;  // while renewing
  std::string reported_leader_;
  bool reported_any_ = false;
  std::mt19937_64 random_{std::random_device{}()};
};

}  // namespace nodevol::leader
