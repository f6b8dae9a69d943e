// EventRecorder: correlation and the per-object spam filter (issue 26 item 6).
#include "controller/events.h"

#include <gtest/gtest.h>

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
  rec.Record(Obj("a"), "Normal", "Provisioning", "provisioning");
  rec.Record(Obj("a"), "Normal", "ProvisioningSucceeded", "done");
  rec.Record(Obj("a"), "Normal", "ProvisioningSucceeded", "done");
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

}  // namespace
}  // namespace nodevol::provisioner
