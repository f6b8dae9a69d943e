// EventRecorder: correlation and the per-object spam filter (issue 26 item 6).
#include "controller/events.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "controller/fakes_test.h"

namespace nodevol::provisioner {
namespace {

using namespace testing;

json Obj(const std::string& name) {
  return {{"kind", "PersistentVolumeClaim"}, {"apiVersion", "v1"},
          {"metadata", {{"namespace", "app"}, {"name", name}, {"uid", "uid-" + name}}}};
}

TEST(Events, ARepeatUpdatesTheCount) {
  FakeApi api;
  FakeClock clock;
  EventRecorder rec(&api, "test", &clock);
  rec.Record(Obj("a"), "Warning", "ProvisioningFailed", "no room");
  rec.Record(Obj("a"), "Warning", "ProvisioningFailed", "no room");
  auto calls = api.Calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].verb, "POST");
  EXPECT_EQ(calls[1].verb, "PATCH");
  EXPECT_EQ(calls[1].body.value("count", 0), 2);
}

// A claim failing forever writes 25 events (or count updates), then one
// every 5 minutes; another object has its own bucket.
TEST(Events, TheSpamFilterBoundsWritesPerObject) {
  FakeApi api;
  FakeClock clock;
  EventRecorder rec(&api, "test", &clock);
  for (int i = 0; i < 100; ++i) {
    rec.Record(Obj("a"), "Normal", "Provisioning", "provisioning");
    rec.Record(Obj("a"), "Warning", "ProvisioningFailed", "no room " + std::to_string(i % 3));
  }
  EXPECT_EQ(api.Writes("/events"), EventRecorder::kSpamBurst);
  rec.Record(Obj("b"), "Warning", "ProvisioningFailed", "no room");
  EXPECT_EQ(api.Writes("/events"), EventRecorder::kSpamBurst + 1);
  clock.Advance(EventRecorder::kSpamRefill);
  rec.Record(Obj("a"), "Warning", "ProvisioningFailed", "no room 0");
  rec.Record(Obj("a"), "Warning", "ProvisioningFailed", "no room 0");
  EXPECT_EQ(api.Writes("/events"), EventRecorder::kSpamBurst + 2);
}

// Asynchronous recording: Record returns before the apiserver is asked;
// the sender writes the events in order, correlation and all.
TEST(Events, AnAsyncRecorderWritesInOrderOffTheCallersThread) {
  FakeApi api;
  FakeClock clock;
  EventRecorder rec(&api, "test", &clock, /*async=*/true);
  // Another object's outcome: a's progress event is not superseded.
  rec.Record(Obj("a"), "Normal", "Provisioning", "provisioning");
  rec.Record(Obj("b"), "Normal", "ProvisioningSucceeded", "done");
  rec.Record(Obj("b"), "Normal", "ProvisioningSucceeded", "done");
  rec.Flush();
  auto calls = api.Calls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].body.value("reason", ""), "Provisioning");
  EXPECT_EQ(calls[1].body.value("reason", ""), "ProvisioningSucceeded");
  EXPECT_EQ(calls[2].verb, "PATCH");
  EXPECT_EQ(calls[2].body.value("count", 0), 2);
}

// An apiserver that does not answer fills the queue: beyond kMaxQueued the
// events are dropped, Record never blocks, and shutting down does not wait.
TEST(Events, AFullQueueDropsAndShutdownDoesNotWait) {
  FakeApi api;
  FakeClock clock;
  // A future, not a mutex locked here and unlocked by the other thread
  // (undefined behaviour, which ThreadSanitizer reported).
  std::promise<void> open;
  std::shared_future<void> gate = open.get_future().share();
  api.SetBlock([gate] { gate.wait(); });
  auto rec = std::make_unique<EventRecorder>(&api, "test", &clock, /*async=*/true);
  for (size_t i = 0; i < EventRecorder::kMaxQueued + 10; ++i)
    rec->Record(Obj("o" + std::to_string(i)), "Normal", "Provisioning", "provisioning");
  auto t0 = std::chrono::steady_clock::now();
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    open.set_value();
  });
  rec.reset();  // waits for the one write in flight only
  release.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_LE(api.Writes("/events"), 2);
}

// Waits (up to 10 s) until `api` has taken `n` event writes.
bool WaitForWrites(FakeApi& api, int n) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (api.Writes("/events") < n && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return api.Writes("/events") >= n;
}

// While claims are queued, events wait (a PV before its events); the
// end of the burst lets them out, in order.
TEST(Events, DeferredWhileBusyThenWrittenInOrder) {
  FakeApi api;
  FakeClock clock;
  std::atomic<bool> busy{true};
  EventRecorder rec(&api, "test", &clock, /*async=*/true);
  rec.DeferWhile([&] { return busy.load(); }, std::chrono::hours(1));
  rec.Record(Obj("a"), "Normal", "Provisioning", "provisioning");
  rec.Record(Obj("b"), "Normal", "Provisioning", "provisioning");
  rec.Record(Obj("b"), "Normal", "ProvisioningSucceeded", "done");  // supersedes b's Provisioning
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(api.Writes("/events"), 0);
  busy = false;
  ASSERT_TRUE(WaitForWrites(api, 2));
  rec.Flush();
  auto calls = api.Calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].body["involvedObject"].value("name", "") + calls[0].body.value("reason", ""), "aProvisioning");
  EXPECT_EQ(calls[1].body["involvedObject"].value("name", "") + calls[1].body.value("reason", ""),
            "bProvisioningSucceeded");
}

// A burst that never ends does not hold an event back longer than the
// bound, and Flush writes deferred events at once.
TEST(Events, DeferringIsBoundedAndFlushEndsIt) {
  FakeApi api;
  FakeClock clock;
  EventRecorder rec(&api, "test", &clock, /*async=*/true);
  rec.DeferWhile([] { return true; }, std::chrono::milliseconds(100));
  rec.Record(Obj("a"), "Normal", "Provisioning", "provisioning");
  EXPECT_TRUE(WaitForWrites(api, 1));

  rec.DeferWhile([] { return true; }, std::chrono::hours(1));
  rec.Record(Obj("b"), "Normal", "Provisioning", "provisioning");
  rec.Flush();
  EXPECT_EQ(api.Writes("/events"), 2);
}

// Deferring never fills the queue: from half of kMaxQueued waiting, the
// sender writes again, so a long burst drops nothing it would not have.
TEST(Events, DeferringStopsAtHalfTheQueue) {
  FakeApi api;
  FakeClock clock;
  EventRecorder rec(&api, "test", &clock, /*async=*/true);
  rec.DeferWhile([] { return true; }, std::chrono::hours(1));
  const size_t n = EventRecorder::kMaxQueued / 2 + 20;
  for (size_t i = 0; i < n; ++i) rec.Record(Obj("o" + std::to_string(i)), "Normal", "Provisioning", "provisioning");
  EXPECT_TRUE(WaitForWrites(api, 21));
  rec.Flush();
  EXPECT_EQ(api.Writes("/events"), static_cast<int>(n));
}

// Clearing the predicate waits for a call of it in progress: an owner
// may destroy what it reads right after.
TEST(Events, ClearingThePredicateWaitsForItsCall) {
  FakeApi api;
  FakeClock clock;
  EventRecorder rec(&api, "test", &clock, /*async=*/true);
  std::atomic<bool> inside{false}, release{false}, returned{false};
  rec.DeferWhile(
      [&] {
        inside = true;
        while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        inside = false;
        return true;
      },
      std::chrono::hours(1));
  rec.Record(Obj("a"), "Normal", "Provisioning", "provisioning");
  while (!inside) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::thread clear([&] {
    rec.DeferWhile(nullptr, {});
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(returned);
  release = true;
  clear.join();
  EXPECT_FALSE(inside);
  EXPECT_TRUE(WaitForWrites(api, 1));
}

// In a burst the sender falls behind: an outcome recorded while its
// object's progress event still waits replaces it, and nothing else.
TEST(Events, AnOutcomeSupersedesItsQueuedProgressEvent) {
  FakeApi api;
  FakeClock clock;
  std::promise<void> open;
  std::shared_future<void> gate = open.get_future().share();
  std::atomic<int> creates{0};
  api.SetBlock([gate, &creates] {
    if (creates++ == 0) gate.wait();  // the first write hangs until released
  });
  EventRecorder rec(&api, "test", &clock, /*async=*/true);
  rec.Record(Obj("z"), "Normal", "Provisioning", "provisioning");  // in flight
  while (creates.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  rec.Record(Obj("a"), "Normal", "Provisioning", "provisioning");
  rec.Record(Obj("b"), "Normal", "Provisioning", "provisioning");
  rec.Record(Obj("a"), "Normal", "ProvisioningSucceeded", "done");
  rec.Record(Obj("b"), "Normal", "Resizing", "resizing");  // no progress of its own superseded
  open.set_value();
  rec.Flush();
  std::vector<std::string> sent;
  for (const auto& c : api.Calls())
    sent.push_back(c.body["involvedObject"].value("name", "") + ":" + c.body.value("reason", ""));
  EXPECT_EQ(sent, (std::vector<std::string>{"z:Provisioning", "b:Provisioning", "a:ProvisioningSucceeded",
                                            "b:Resizing"}));
}

}  // namespace
}  // namespace nodevol::provisioner
