// CallWithin (base/bounded_call.h): a call that never returns is given up
// at the limit, with a message that says so, and its thread is left to
// finish later without harm; a call that returns in time is its own answer.
#include "base/bounded_call.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

namespace nodevol {
namespace {

using namespace std::chrono_literals;

TEST(BoundedCall, AnswerInTimeIsTheCallsOwn) {
  EXPECT_TRUE(CallWithin(5s, "nothing", [] { return Status::Ok(); }).ok());
  Status st = CallWithin(5s, "wipe /dev/x", [] { return Status::Unavailable("wipe /dev/x: Input/output error"); });
  EXPECT_EQ(st.code(), Status::Code::kUnavailable);
  EXPECT_EQ(st.message(), "wipe /dev/x: Input/output error");
}

TEST(BoundedCall, AHungCallIsGivenUpAtTheLimitAndFinishesLater) {
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto finished = std::make_shared<std::atomic<bool>>(false);
  auto t0 = std::chrono::steady_clock::now();
  Status st = CallWithin(200ms, "wipe /dev/nvx/v", [release, finished] {
    while (!*release) std::this_thread::sleep_for(5ms);  // a write the disk never finishes
    *finished = true;
    return Status::Ok();
  });
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(st.code(), Status::Code::kDeadlineExceeded);
  EXPECT_NE(st.message().find("wipe /dev/nvx/v has not finished within 200 ms"), std::string::npos) << st.message();
  EXPECT_GE(took, 200ms);  // no upper bound: the call never ends by itself (issue 68 item 10)
  // The disk answers: the call ends on its own thread, its answer dropped.
  *release = true;
  for (int i = 0; i < 400 && !*finished; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(*finished);
}

// A long call that keeps making progress is waited for past the limit;
// the limit is the longest wait between steps.
TEST(BoundedCall, ProgressKeepsALongCallGoing) {
  auto t0 = std::chrono::steady_clock::now();
  Status st = CallWhileAdvancing(200ms, "remove tree", {[](const Step& step) {
                                                          for (int i = 0; i < 12; ++i) {
                                                            std::this_thread::sleep_for(50ms);
                                                            step();
                                                          }
                                                          return Status::Ok();
                                                        },
                                                        {}, {}});
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 600ms);
}

TEST(BoundedCall, AStalledCallIsGivenUpALimitAfterItsLastStep) {
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto overran = std::make_shared<std::atomic<int>>(0);
  auto late = std::make_shared<std::atomic<int>>(0);
  auto t0 = std::chrono::steady_clock::now();
  BoundedWork call;
  call.work = [release](const Step& step) {
    for (int i = 0; i < 4; ++i) {
      std::this_thread::sleep_for(100ms);
      step();
    }
    while (!*release) std::this_thread::sleep_for(5ms);  // the disk stops answering
    return Status::Unavailable("late answer");
  };
  call.on_overrun = [overran, late] {
    EXPECT_EQ(*late, 0);
    ++*overran;
  };
  call.on_late_finish = [overran, late](const Status& st) {
    EXPECT_EQ(*overran, 1);
    EXPECT_EQ(st.message(), "late answer");
    ++*late;
  };
  Status st = CallWhileAdvancing(300ms, "delete of volume v", std::move(call));
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(st.code(), Status::Code::kDeadlineExceeded);
  EXPECT_NE(st.message().find("delete of volume v has made no progress for 300 ms"), std::string::npos)
      << st.message();
  EXPECT_GE(took, 700ms);  // 4 steps of 100 ms, then the limit; the call never ends by itself
  EXPECT_EQ(*overran, 1);
  EXPECT_EQ(*late, 0);
  *release = true;
  for (int i = 0; i < 400 && *late == 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(*late, 1);
}

}  // namespace
}  // namespace nodevol
