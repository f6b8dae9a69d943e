#include "leader/leader_elector.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "leader/memory_lease_store.h"

namespace nodevol::leader {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

std::unique_ptr<LeaderElector> MakeElector(LeaseStore* store, const Clock* clock, const std::string& identity,
                                           LeaderCallbacks callbacks = {}, bool release_on_cancel = false) {
  std::unique_ptr<LeaderElector> elector;
  LeaderElectorConfig config;
  config.identity = identity;
  config.release_on_cancel = release_on_cancel;
  Status st = LeaderElector::New(store, clock, config, std::move(callbacks), &elector);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return elector;
}

// Advances the fake clock one second at a time, but only while a thread is
// asleep on it, until `done` holds; false if that takes more than ten
// minutes of fake time or a minute of real time (the code under test is
// stuck or spinning: a bound against hangs, not a timing assertion).
template <typename Pred>
bool DriveUntil(FakeClock& clock, Pred done) {
  const Clock::TimePoint limit = clock.Now() + std::chrono::minutes(10);
  const auto real_limit = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  while (!done()) {
    if (clock.Now() >= limit || std::chrono::steady_clock::now() >= real_limit) return false;
    if (clock.Waiters() > 0) {
      clock.Advance(seconds(1));
    } else {
      std::this_thread::yield();
    }
  }
  return true;
}

// Run() on a thread; stopped and joined on scope exit even when an
// assertion fails first.
class Running {
 public:
  explicit Running(LeaderElector* elector) : elector_(elector), thread_([elector] { elector->Run(); }) {}
  ~Running() { Join(); }
  void Join() {
    if (!thread_.joinable()) return;
    elector_->Stop();
    thread_.join();
  }

 private:
  LeaderElector* elector_;
  std::thread thread_;
};

TEST(LeaderElectorTest, ValidatesConfig) {
  MemoryLeaseStore store;
  FakeClock clock;
  std::unique_ptr<LeaderElector> e;
  LeaderElectorConfig ok{.identity = "a"};
  EXPECT_TRUE(LeaderElector::New(&store, &clock, ok, {}, &e).ok());
  LeaderElectorConfig c = ok;
  c.identity = "";
  EXPECT_FALSE(LeaderElector::New(&store, &clock, c, {}, &e).ok());
  c = ok;
  c.renew_deadline = c.lease_duration;
  EXPECT_FALSE(LeaderElector::New(&store, &clock, c, {}, &e).ok());
  c = ok;
  c.renew_deadline = seconds(2);  // not above 1.2 * retry period
  EXPECT_FALSE(LeaderElector::New(&store, &clock, c, {}, &e).ok());
  c = ok;
  c.retry_period = seconds(0);
  EXPECT_FALSE(LeaderElector::New(&store, &clock, c, {}, &e).ok());
  // What --lease-duration-seconds and its siblings set, checked before
  // anything starts: shorter timings in order pass, and a refusal says
  // which rule they broke.
  c = ok;
  c.lease_duration = seconds(6);
  c.renew_deadline = seconds(4);
  c.retry_period = seconds(1);
  EXPECT_TRUE(LeaderElector::CheckTimings(c).ok());
  c.renew_deadline = seconds(6);
  EXPECT_NE(LeaderElector::CheckTimings(c).message().find("greater than the renew deadline"), std::string::npos);
  c.lease_duration = std::chrono::milliseconds(950);
  c.renew_deadline = std::chrono::milliseconds(900);
  c.retry_period = std::chrono::milliseconds(100);
  EXPECT_NE(LeaderElector::CheckTimings(c).message().find("at least 1s"), std::string::npos);
  c.lease_duration = std::chrono::hours(24) + seconds(1);
  c.renew_deadline = seconds(10);
  EXPECT_NE(LeaderElector::CheckTimings(c).message().find("at most a day"), std::string::npos);
}

TEST(LeaderElectorTest, FirstCandidateCreatesTheLease) {
  MemoryLeaseStore store;
  FakeClock clock;
  auto a = MakeElector(&store, &clock, "a");
  EXPECT_TRUE(a->TryAcquireOrRenew());
  EXPECT_TRUE(a->IsLeader());
  auto record = store.record();
  ASSERT_TRUE(record);
  EXPECT_EQ(record->holder_identity, "a");
  EXPECT_EQ(record->lease_duration_seconds, 15);
  EXPECT_EQ(record->lease_transitions, 0);
  EXPECT_EQ(record->acquire_time, TruncateToMicros(clock.WallNow()));
  EXPECT_EQ(record->renew_time, record->acquire_time);
}

TEST(LeaderElectorTest, TwoCandidatesOnlyOneLeads) {
  MemoryLeaseStore store;
  FakeClock clock;
  auto a = MakeElector(&store, &clock, "a");
  auto b = MakeElector(&store, &clock, "b");
  ASSERT_TRUE(a->TryAcquireOrRenew());
  const Clock::WallTime acquired = store.record()->acquire_time;
  for (int i = 0; i < 60; ++i) {
    EXPECT_FALSE(b->TryAcquireOrRenew()) << i;
    EXPECT_FALSE(b->IsLeader());
    EXPECT_EQ(b->Leader(), "a");
    clock.Advance(seconds(2));
    EXPECT_TRUE(a->TryAcquireOrRenew()) << i;  // renews every retry period
  }
  auto record = store.record();
  EXPECT_EQ(record->holder_identity, "a");
  EXPECT_EQ(record->lease_transitions, 0);
  EXPECT_EQ(record->acquire_time, acquired);  // renewals keep it
  EXPECT_EQ(record->renew_time, TruncateToMicros(clock.WallNow()));
}

TEST(LeaderElectorTest, DeadLeaderIsTakenOverAfterLeaseDurationWithoutChange) {
  MemoryLeaseStore store;
  FakeClock clock;
  auto a = MakeElector(&store, &clock, "a");
  auto b = MakeElector(&store, &clock, "b");
  ASSERT_TRUE(a->TryAcquireOrRenew());
  EXPECT_FALSE(b->TryAcquireOrRenew());  // b first sees the record now
  // a dies: nothing renews.
  clock.Advance(seconds(14));
  EXPECT_FALSE(b->TryAcquireOrRenew());
  clock.Advance(seconds(1));
  EXPECT_TRUE(b->TryAcquireOrRenew());
  auto record = store.record();
  EXPECT_EQ(record->holder_identity, "b");
  EXPECT_EQ(record->lease_transitions, 1);
  EXPECT_EQ(record->acquire_time, TruncateToMicros(clock.WallNow()));
  // a comes back: it sees b's fresh record and does not lead.
  EXPECT_FALSE(a->TryAcquireOrRenew());
  EXPECT_FALSE(a->IsLeader());
  EXPECT_EQ(a->Leader(), "b");
}

// The leader's wall clock runs an hour ahead, so its renewTime is in the
// future for the others: that must not keep its dead lease alive.
TEST(LeaderElectorTest, RenewTimeInTheFutureDoesNotKeepADeadLeaseAlive) {
  MemoryLeaseStore store;
  FakeClock clock_a, clock_b;
  clock_a.SetWallNow(clock_b.WallNow() + hours(1));
  auto a = MakeElector(&store, &clock_a, "a");
  auto b = MakeElector(&store, &clock_b, "b");
  ASSERT_TRUE(a->TryAcquireOrRenew());
  ASSERT_GT(store.record()->renew_time, clock_b.WallNow() + seconds(3000));
  EXPECT_FALSE(b->TryAcquireOrRenew());
  clock_b.Advance(seconds(14));
  EXPECT_FALSE(b->TryAcquireOrRenew());
  clock_b.Advance(seconds(1));
  EXPECT_TRUE(b->TryAcquireOrRenew());
  EXPECT_EQ(store.record()->holder_identity, "b");
}

// The leader's wall clock runs an hour behind, so its renewTime looks long
// expired to the others: that must not let anyone take a live lease early.
TEST(LeaderElectorTest, RenewTimeInThePastDoesNotShortenTheWait) {
  MemoryLeaseStore store;
  FakeClock clock_a, clock_b;
  clock_a.SetWallNow(clock_b.WallNow() - hours(1));
  auto a = MakeElector(&store, &clock_a, "a");
  auto b = MakeElector(&store, &clock_b, "b");
  ASSERT_TRUE(a->TryAcquireOrRenew());
  EXPECT_FALSE(b->TryAcquireOrRenew());
  clock_b.Advance(seconds(14));
  EXPECT_FALSE(b->TryAcquireOrRenew());
  EXPECT_EQ(store.record()->holder_identity, "a");
}

TEST(LeaderElectorTest, AChangedRecordRestartsTheWait) {
  MemoryLeaseStore store;
  FakeClock clock;
  auto a = MakeElector(&store, &clock, "a");
  auto b = MakeElector(&store, &clock, "b");
  ASSERT_TRUE(a->TryAcquireOrRenew());  // t0
  EXPECT_FALSE(b->TryAcquireOrRenew());
  clock.Advance(seconds(10));
  ASSERT_TRUE(a->TryAcquireOrRenew());  // t10: a's last renewal, then it dies
  clock.Advance(seconds(5));
  EXPECT_FALSE(b->TryAcquireOrRenew());  // t15: b sees the change now
  clock.Advance(seconds(14));
  EXPECT_FALSE(b->TryAcquireOrRenew());  // t29
  clock.Advance(seconds(1));
  EXPECT_TRUE(b->TryAcquireOrRenew());  // t30
}

TEST(LeaderElectorTest, ConflictOnTakeoverMeansTheOtherCandidateWon) {
  MemoryLeaseStore store;
  FakeClock clock;
  auto a = MakeElector(&store, &clock, "a");
  auto b = MakeElector(&store, &clock, "b");
  auto c = MakeElector(&store, &clock, "c");
  ASSERT_TRUE(a->TryAcquireOrRenew());
  EXPECT_FALSE(b->TryAcquireOrRenew());
  EXPECT_FALSE(c->TryAcquireOrRenew());
  clock.Advance(seconds(15));
  // b reads the expired lease; c takes it between b's read and b's write.
  bool c_won = false;
  store.BeforeNextUpdate([&] { c_won = c->TryAcquireOrRenew(); });
  EXPECT_FALSE(b->TryAcquireOrRenew());
  EXPECT_TRUE(c_won);
  EXPECT_TRUE(c->IsLeader());
  EXPECT_FALSE(b->IsLeader());
  auto record = store.record();
  EXPECT_EQ(record->holder_identity, "c");
  EXPECT_EQ(record->lease_transitions, 1);
  // b now waits out c's lease like anyone else.
  EXPECT_FALSE(b->TryAcquireOrRenew());
  EXPECT_EQ(b->Leader(), "c");
}

TEST(LeaderElectorTest, LeaderFallsBackToAReadWhenTheFastPathConflicts) {
  MemoryLeaseStore store;
  FakeClock clock;
  auto a = MakeElector(&store, &clock, "a");
  ASSERT_TRUE(a->TryAcquireOrRenew());
  // Someone else bumps the resourceVersion without changing the holder
  // (e.g. a label edit): a's blind renewal conflicts, the read path renews.
  LeaseRecord same = *store.record();
  store.Put(same);
  clock.Advance(seconds(2));
  EXPECT_TRUE(a->TryAcquireOrRenew());
  EXPECT_EQ(store.record()->renew_time, TruncateToMicros(clock.WallNow()));
  EXPECT_EQ(store.record()->lease_transitions, 0);
}

TEST(LeaderElectorTest, LeaderSeesItWasReplaced) {
  MemoryLeaseStore store;
  FakeClock clock;
  auto a = MakeElector(&store, &clock, "a");
  ASSERT_TRUE(a->TryAcquireOrRenew());
  LeaseRecord other = *store.record();
  other.holder_identity = "z";
  other.lease_transitions = 1;
  store.Put(other);
  EXPECT_FALSE(a->TryAcquireOrRenew());
  EXPECT_FALSE(a->IsLeader());
  EXPECT_EQ(store.record()->holder_identity, "z");
}

TEST(LeaderElectorTest, RunStopsLeadingWhenRenewalFailsPastTheDeadline) {
  MemoryLeaseStore store;
  FakeClock clock;
  std::atomic<bool> started{false}, stopped{false};
  Clock::WallTime stopped_at;
  auto a = MakeElector(&store, &clock, "a",
                       {.on_started_leading = [&] { started = true; },
                        .on_stopped_leading =
                            [&] {
                              stopped_at = clock.WallNow();
                              stopped = true;
                            }});
  Running runner(a.get());
  ASSERT_TRUE(DriveUntil(clock, [&] { return started.load(); }));
  // Let it renew for a while, then cut it off from the apiserver.
  Clock::TimePoint until = clock.Now() + seconds(7);
  ASSERT_TRUE(DriveUntil(clock, [&] { return clock.Now() >= until; }));
  EXPECT_TRUE(a->IsLeader());
  EXPECT_FALSE(stopped.load());
  store.SetUnavailable(true);
  ASSERT_TRUE(DriveUntil(clock, [&] { return stopped.load(); }));
  runner.Join();
  // It gave up no sooner than the renew deadline and before the lease could
  // expire for anyone else (lease duration after its last renewal).
  Clock::WallTime last_renewal = store.record()->renew_time;
  EXPECT_GE(stopped_at - last_renewal, seconds(10));
  EXPECT_LT(stopped_at - last_renewal, seconds(15));
}

// Issue 26 item 1: a replica that lost the lease must not hand it over
// (the successor would lead at once while this one may still be acting);
// it leaves the lease to expire. Only a clean Stop releases.
// Renewals (and reads) fail while `failing`; any other write (a release)
// would get through: an apiserver that is slow for some requests only.
class FailRenewalsStore : public MemoryLeaseStore {
 public:
  std::atomic<bool> failing{false};
  Status Get(LeaseRecord* record, std::string* rv) override {
    if (failing) return Status::Unavailable("renewals fail");
    return MemoryLeaseStore::Get(record, rv);
  }
  Status Update(const LeaseRecord& record, const std::string& rv, std::string* new_rv) override {
    if (failing && !record.holder_identity.empty()) return Status::Unavailable("renewals fail");
    return MemoryLeaseStore::Update(record, rv, new_rv);
  }
};

TEST(LeaderElectorTest, ALostLeaseIsNotReleased) {
  FailRenewalsStore store;
  FakeClock clock;
  std::atomic<bool> started{false}, stopped{false};
  auto a = MakeElector(&store, &clock, "a",
                       {.on_started_leading = [&] { started = true; }, .on_stopped_leading = [&] { stopped = true; }},
                       /*release_on_cancel=*/true);
  Running runner(a.get());
  ASSERT_TRUE(DriveUntil(clock, [&] { return started.load(); }));
  store.failing = true;
  ASSERT_TRUE(DriveUntil(clock, [&] { return stopped.load(); }));
  store.failing = false;
  runner.Join();
  EXPECT_EQ(store.record()->holder_identity, "a");
  EXPECT_EQ(store.record()->lease_duration_seconds, 15);
  // A successor waits the lease out.
  auto b = MakeElector(&store, &clock, "b");
  EXPECT_FALSE(b->TryAcquireOrRenew());
}

// A store whose calls each take `delay` of fake time, ending as a timeout
// when the limit the elector gave is shorter (as the Kubernetes client does).
class SlowStore : public MemoryLeaseStore {
 public:
  explicit SlowStore(FakeClock* clock) : clock_(clock) {}
  void Slow(Clock::Duration delay, bool fail_next_update) {
    delay_ = delay;
    fail_next_update_ = fail_next_update;
  }
  Status Get(LeaseRecord* record, std::string* rv) override {
    NODEVOL_RETURN_IF_ERROR(Take());
    return MemoryLeaseStore::Get(record, rv);
  }
  Status Update(const LeaseRecord& record, const std::string& rv, std::string* new_rv) override {
    NODEVOL_RETURN_IF_ERROR(Take());
    if (fail_next_update_.exchange(false)) return Status::Unavailable("slow store: update failed");
    return MemoryLeaseStore::Update(record, rv, new_rv);
  }

 private:
  Status Take() {
    Clock::Duration limit = last_call_timeout();
    Clock::Duration delay = delay_.load();
    if (delay > limit) {
      clock_->Advance(limit);
      return Status::Unavailable("slow store: timed out");
    }
    clock_->Advance(delay);
    return Status::Ok();
  }
  FakeClock* clock_;
  std::atomic<Clock::Duration> delay_{Clock::Duration::zero()};
  std::atomic<bool> fail_next_update_{false};
};

// Issue 26 item 4: one renewal try can be PUT (fails) + GET + PUT, each
// slow; the renew deadline must bound the whole try, so the leader stops
// leading by the deadline instead of succeeding past it.
TEST(LeaderElectorTest, TheRenewDeadlineBoundsARenewalInFlight) {
  FakeClock clock;
  SlowStore store(&clock);
  std::atomic<bool> started{false}, stopped{false};
  Clock::WallTime stopped_at;
  auto a = MakeElector(&store, &clock, "a",
                       {.on_started_leading = [&] { started = true; },
                        .on_stopped_leading =
                            [&] {
                              stopped_at = clock.WallNow();
                              stopped = true;
                            }});
  Running runner(a.get());
  ASSERT_TRUE(DriveUntil(clock, [&] { return started.load(); }));
  // Arm the slow store only while the leader sleeps between renewals (not
  // in the middle of one).
  clock.BlockUntilWaiters(1);
  Clock::WallTime last_renewal = store.record()->renew_time;
  store.Slow(seconds(4), /*fail_next_update=*/true);
  ASSERT_TRUE(DriveUntil(clock, [&] { return stopped.load(); }));
  runner.Join();
  // It stopped within the renew deadline of the round that began one
  // retry period after its last renewal: before the lease (15 s) could
  // expire for a successor.
  EXPECT_LE(stopped_at - last_renewal, seconds(12));
  EXPECT_EQ(store.record()->renew_time, last_renewal);
}

TEST(LeaderElectorTest, StopWithReleaseLetsASuccessorTakeOverAtOnce) {
  MemoryLeaseStore store;
  FakeClock clock;
  std::atomic<bool> started{false}, stopped{false};
  auto a = MakeElector(&store, &clock, "a",
                       {.on_started_leading = [&] { started = true; }, .on_stopped_leading = [&] { stopped = true; }},
                       /*release_on_cancel=*/true);
  Running runner(a.get());
  ASSERT_TRUE(DriveUntil(clock, [&] { return started.load(); }));
  a->Stop();
  runner.Join();
  EXPECT_TRUE(stopped.load());
  auto record = store.record();
  EXPECT_EQ(record->holder_identity, "");
  EXPECT_EQ(record->lease_duration_seconds, 1);
  EXPECT_EQ(record->lease_transitions, 0);

  auto b = MakeElector(&store, &clock, "b");
  EXPECT_TRUE(b->TryAcquireOrRenew());  // no waiting
  EXPECT_EQ(store.record()->lease_transitions, 1);
}

TEST(LeaderElectorTest, StopWithoutReleaseLeavesTheLeaseToExpire) {
  MemoryLeaseStore store;
  FakeClock clock;
  std::atomic<bool> started{false};
  auto a = MakeElector(&store, &clock, "a", {.on_started_leading = [&] { started = true; }});
  Running runner(a.get());
  ASSERT_TRUE(DriveUntil(clock, [&] { return started.load(); }));
  a->Stop();
  runner.Join();
  EXPECT_EQ(store.record()->holder_identity, "a");
  auto b = MakeElector(&store, &clock, "b");
  EXPECT_FALSE(b->TryAcquireOrRenew());
}

TEST(LeaderElectorTest, CandidateReportsLeadersAndTakesAReleasedLease) {
  MemoryLeaseStore store;
  FakeClock clock;
  auto a = MakeElector(&store, &clock, "a");
  ASSERT_TRUE(a->TryAcquireOrRenew());

  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> leaders;
  std::atomic<bool> started{false};
  auto b = MakeElector(&store, &clock, "b",
                       {.on_started_leading = [&] { started = true; },
                        .on_new_leader =
                            [&](const std::string& who) {
                              std::lock_guard<std::mutex> guard(mu);
                              leaders.push_back(who);
                              cv.notify_all();
                            }});
  Running runner(b.get());
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return !leaders.empty(); });
  }
  EXPECT_FALSE(started.load());
  ASSERT_TRUE(a->Release());
  ASSERT_TRUE(DriveUntil(clock, [&] { return started.load(); }));
  b->Stop();
  runner.Join();
  EXPECT_EQ(leaders, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(store.record()->lease_transitions, 1);
}

TEST(LeaderElectorTest, StopBeforeRunReturnsAtOnce) {
  MemoryLeaseStore store;
  FakeClock clock;
  bool started = false;
  auto a = MakeElector(&store, &clock, "a", {.on_started_leading = [&] { started = true; }});
  a->Stop();
  a->Run();
  EXPECT_FALSE(started);
  EXPECT_FALSE(store.record());
}

}  // namespace
}  // namespace nodevol::leader
