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
  EXPECT_GE(took, 200ms);
  EXPECT_LT(took, 2s);
  // The disk answers: the call ends on its own thread, its answer dropped.
  *release = true;
  for (int i = 0; i < 400 && !*finished; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_TRUE(*finished);
}

}  // namespace
}  // namespace nodevol
