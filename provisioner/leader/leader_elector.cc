#include "leader/leader_elector.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace nodevol::leader {

using std::chrono::duration_cast;
using std::chrono::seconds;

Status LeaderElector::New(LeaseStore* store, const Clock* clock, LeaderElectorConfig config,
                          LeaderCallbacks callbacks, std::unique_ptr<LeaderElector>* out) {
  if (config.identity.empty()) return Status::InvalidArgument("leader election: identity is empty");
  NODEVOL_RETURN_IF_ERROR(CheckTimings(config));
  out->reset(new LeaderElector(store, clock, std::move(config), std::move(callbacks)));
  return Status::Ok();
}

Status LeaderElector::CheckTimings(const LeaderElectorConfig& config) {
  if (config.retry_period <= Clock::Duration::zero()) {
    return Status::InvalidArgument("leader election: retry period must be positive");
  }
  if (config.lease_duration <= config.renew_deadline) {
    return Status::InvalidArgument("leader election: lease duration must be greater than the renew deadline");
  }
  if (config.renew_deadline <= duration_cast<Clock::Duration>(config.retry_period * kJitterFactor)) {
    return Status::InvalidArgument("leader election: renew deadline must be greater than retry period * 1.2");
  }
  if (config.lease_duration < seconds(1)) {
    return Status::InvalidArgument("leader election: lease duration must be at least 1s (the Lease counts seconds)");
  }
  // The others are below it. Beyond a day it is a typo.
  if (config.lease_duration > std::chrono::hours(24)) {
    return Status::InvalidArgument("leader election: lease duration must be at most a day (86400 s)");
  }
  return Status::Ok();
}

LeaderElector::LeaderElector(LeaseStore* store, const Clock* clock, LeaderElectorConfig config,
                             LeaderCallbacks callbacks)
    : store_(store), clock_(clock), config_(std::move(config)), callbacks_(std::move(callbacks)) {}

bool LeaderElector::IsLeaderLocked() const { return observed_.holder_identity == config_.identity; }

bool LeaderElector::IsLeader() const {
  std::lock_guard<std::mutex> guard(mu_);
  return IsLeaderLocked();
}

std::string LeaderElector::Leader() const {
  std::lock_guard<std::mutex> guard(mu_);
  return observed_.holder_identity;
}

// Valid while fewer than the record's own leaseDurationSeconds have passed,
// by our clock, since we saw the record change.
bool LeaderElector::IsLeaseValidLocked(Clock::TimePoint now) const {
  return observed_time_ + seconds(observed_.lease_duration_seconds) > now;
}

void LeaderElector::SetObservedLocked(const LeaseRecord& record) {
  observed_ = record;
  observed_time_ = clock_->Now();
}

bool LeaderElector::TryAcquireOrRenew() {
  Clock::WallTime wall_now = TruncateToMicros(clock_->WallNow());
  LeaseRecord desired;
  desired.holder_identity = config_.identity;
  desired.lease_duration_seconds = static_cast<int>(duration_cast<seconds>(config_.lease_duration).count());
  desired.acquire_time = wall_now;
  desired.renew_time = wall_now;

  // 1. Fast path: we lead and our lease is valid; renew on the version we
  //    wrote last.
  std::string version;
  bool fast = false;
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (IsLeaderLocked() && IsLeaseValidLocked(clock_->Now())) {
      desired.acquire_time = observed_.acquire_time;
      desired.lease_transitions = observed_.lease_transitions;
      version = resource_version_;
      fast = true;
    }
  }
  if (fast) {
    if (!LimitNextCall()) return false;
    std::string new_version;
    Status st = store_->Update(desired, version, &new_version);
    if (st.ok()) {
      std::lock_guard<std::mutex> guard(mu_);
      SetObservedLocked(desired);
      resource_version_ = new_version;
      return true;
    }
    spdlog::warn("leader election: renewing {} failed, falling back to a read: {}", store_->Describe(),
                 st.ToString());
  }

  // 2. Read the lease, or create it.
  LeaseRecord current;
  if (!LimitNextCall()) return false;
  Status st = store_->Get(&current, &version);
  if (st.code() == Status::Code::kNotFound) {
    desired.acquire_time = wall_now;
    desired.lease_transitions = 0;
    std::string new_version;
    if (!LimitNextCall()) return false;
    st = store_->Create(desired, &new_version);
    if (!st.ok()) {
      spdlog::warn("leader election: creating {} failed: {}", store_->Describe(), st.ToString());
      return false;
    }
    std::lock_guard<std::mutex> guard(mu_);
    SetObservedLocked(desired);
    resource_version_ = new_version;
    return true;
  }
  if (!st.ok()) {
    spdlog::warn("leader election: reading {} failed: {}", store_->Describe(), st.ToString());
    return false;
  }

  // 3. Someone else's valid lease: wait. Validity restarts whenever the
  //    record changes, timed by our clock alone.
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (current != observed_) SetObservedLocked(current);
    resource_version_ = version;
    if (!current.holder_identity.empty() && IsLeaseValidLocked(clock_->Now()) && !IsLeaderLocked()) {
      return false;
    }
    // 4. Ours to take (or renew on the slow path).
    if (IsLeaderLocked()) {
      desired.acquire_time = current.acquire_time;
      desired.lease_transitions = current.lease_transitions;
    } else {
      desired.lease_transitions = current.lease_transitions + 1;
    }
  }
  std::string new_version;
  if (!LimitNextCall()) return false;
  st = store_->Update(desired, version, &new_version);
  if (!st.ok()) {
    // FAILED_PRECONDITION: another candidate updated it first.
    spdlog::info("leader election: updating {} failed: {}", store_->Describe(), st.ToString());
    return false;
  }
  std::lock_guard<std::mutex> guard(mu_);
  SetObservedLocked(desired);
  resource_version_ = new_version;
  return true;
}

bool LeaderElector::LimitNextCall() {
  Clock::Duration limit = config_.renew_deadline;
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (renew_deadline_) {
      limit = *renew_deadline_ - clock_->Now();
      if (limit <= Clock::Duration::zero()) {
        spdlog::warn("leader election: the renew deadline passed during the renewal of {}", store_->Describe());
        return false;
      }
    }
  }
  store_->SetCallTimeout(limit);
  return true;
}

void LeaderElector::SetRenewDeadline(std::optional<Clock::TimePoint> deadline) {
  std::lock_guard<std::mutex> guard(mu_);
  renew_deadline_ = deadline;
}

bool LeaderElector::Release() {
  LeaseRecord released;
  std::string version;
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (!IsLeaderLocked()) return true;
    Clock::WallTime now = TruncateToMicros(clock_->WallNow());
    released.lease_duration_seconds = 1;
    released.acquire_time = now;
    released.renew_time = now;
    released.lease_transitions = observed_.lease_transitions;
    version = resource_version_;
  }
  std::string new_version;
  Status st = store_->Update(released, version, &new_version);
  if (!st.ok()) {
    spdlog::warn("leader election: releasing {} failed: {}", store_->Describe(), st.ToString());
    return false;
  }
  spdlog::info("leader election: released the lease {}", store_->Describe());
  std::lock_guard<std::mutex> guard(mu_);
  SetObservedLocked(released);
  resource_version_ = new_version;
  return true;
}

void LeaderElector::MaybeReportTransition() {
  std::string leader;
  {
    std::lock_guard<std::mutex> guard(mu_);
    if (reported_any_ && observed_.holder_identity == reported_leader_) return;
    reported_any_ = true;
    reported_leader_ = observed_.holder_identity;
    leader = reported_leader_;
  }
  spdlog::info("leader election: {} is led by \"{}\"", store_->Describe(), leader);
  if (callbacks_.on_new_leader) callbacks_.on_new_leader(leader);
}

void LeaderElector::Stop() {
  std::lock_guard<std::mutex> guard(mu_);
  stopped_ = true;
  stop_cv_.notify_all();
}

bool LeaderElector::SleepUntil(Clock::TimePoint deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopped_ && clock_->Now() < deadline) clock_->WaitUntil(stop_cv_, lock, deadline);
  return !stopped_;
}

Clock::Duration LeaderElector::Jittered(Clock::Duration d) {
  std::uniform_real_distribution<double> dist(0.0, kJitterFactor);
  double factor;
  {
    std::lock_guard<std::mutex> guard(mu_);
    factor = dist(random_);
  }
  return d + duration_cast<Clock::Duration>(d * factor);
}

void LeaderElector::Run() {
  // Acquire: try every jittered retry period until we lead or are stopped.
  for (;;) {
    {
      std::lock_guard<std::mutex> guard(mu_);
      if (stopped_) return;
    }
    bool acquired = TryAcquireOrRenew();
    MaybeReportTransition();
    if (acquired) break;
    if (!SleepUntil(clock_->Now() + Jittered(config_.retry_period))) return;
  }
  spdlog::info("leader election: {} acquired by {}", store_->Describe(), config_.identity);
  if (callbacks_.on_started_leading) callbacks_.on_started_leading();

  // Renew: each round retries every retry period until it succeeds or the
  // renew deadline passes; a successful round waits one retry period.
  // Every request of a round ends by the round's deadline, and a renewal
  // that still succeeded after it counts as lost: past the deadline a
  // successor may already be counting the lease down.
  bool stopped = false;
  for (;;) {
    Clock::TimePoint deadline = clock_->Now() + config_.renew_deadline;
    SetRenewDeadline(deadline);
    bool renewed = false;
    for (;;) {
      if (TryAcquireOrRenew()) {
        renewed = clock_->Now() < deadline;
        break;
      }
      Clock::TimePoint next = std::min(clock_->Now() + config_.retry_period, deadline);
      if (!SleepUntil(next)) {
        stopped = true;
        break;
      }
      if (clock_->Now() >= deadline) break;
    }
    MaybeReportTransition();
    if (!renewed) break;
    if (!SleepUntil(clock_->Now() + config_.retry_period)) {
      stopped = true;
      break;
    }
  }
  SetRenewDeadline(std::nullopt);
  if (stopped) {
    spdlog::info("leader election: {} stopping as asked", config_.identity);
    // Only a clean stop releases (the caller stopped its work first). A
    // lost lease is never released: the successor must wait it out, by
    // which time this replica has stopped acting (client-go does the same).
    if (config_.release_on_cancel) Release();
  } else {
    spdlog::error("leader election: {} could not renew {} within {}s: stopped leading", config_.identity,
                  store_->Describe(), duration_cast<seconds>(config_.renew_deadline).count());
  }
  if (callbacks_.on_stopped_leading) callbacks_.on_stopped_leading();
}

}  // namespace nodevol::leader
