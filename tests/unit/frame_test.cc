// base/frame.h on a socketpair: what each end sees of whole, split,
// truncated, oversized and late frames.
#include "base/frame.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

namespace nodevol {
namespace {

class FrameTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds_), 0);
    struct timeval tv = {0, 200000};
    ::setsockopt(fds_[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  void TearDown() override {
    if (fds_[0] >= 0) ::close(fds_[0]);
    ::close(fds_[1]);
  }
  void SendRaw(const std::string& bytes) {
    ASSERT_EQ(::send(fds_[0], bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  }
  int fds_[2] = {-1, -1};
};

TEST_F(FrameTest, RoundTripsIncludingEmptyAndBinaryPayloads) {
  std::string binary("a\0b\xff", 4);
  for (const std::string& payload : {std::string(), std::string("hello"), binary, std::string(100000, 'x')}) {
    std::thread writer([&] { EXPECT_EQ(WriteFrame(fds_[0], payload), FrameResult::kOk); });
    std::string got = "stale";
    EXPECT_EQ(ReadFrame(fds_[1], kMaxFrame, &got), FrameResult::kOk);
    writer.join();
    EXPECT_EQ(got, payload);
  }
}

TEST_F(FrameTest, LengthIsBigEndianAndSplitWritesAreJoined) {
  SendRaw(std::string("\0\0\0", 3));
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    SendRaw(std::string("\x03", 1) + "ab");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    SendRaw("c");
  });
  std::string got;
  EXPECT_EQ(ReadFrame(fds_[1], kMaxFrame, &got), FrameResult::kOk);
  late.join();
  EXPECT_EQ(got, "abc");
}

TEST_F(FrameTest, CleanCloseBetweenFramesIsEofButMidFrameIsAnError) {
  ::close(fds_[0]);
  fds_[0] = -1;
  std::string got;
  EXPECT_EQ(ReadFrame(fds_[1], kMaxFrame, &got), FrameResult::kEof);

  int again[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, again), 0);
  ASSERT_EQ(::send(again[0], "\0\0\0\x05" "ab", 6, 0), 6);
  ::close(again[0]);
  EXPECT_EQ(ReadFrame(again[1], kMaxFrame, &got), FrameResult::kError);
  ::close(again[1]);
}

TEST_F(FrameTest, OversizedLengthIsRefusedBeforeReadingThePayload) {
  SendRaw(std::string("\xff\xff\xff\xff", 4));
  std::string got;
  EXPECT_EQ(ReadFrame(fds_[1], kMaxFrame, &got), FrameResult::kTooLarge);
  EXPECT_TRUE(got.empty());
  SendRaw(std::string("\0\0\0\x09", 4));
  EXPECT_EQ(ReadFrame(fds_[1], 8, &got), FrameResult::kTooLarge);
  EXPECT_EQ(WriteFrame(fds_[0], std::string(kMaxFrame + 1, 'x')), FrameResult::kTooLarge);
}

TEST_F(FrameTest, SilencePastTheSocketTimeoutIsATimeout) {
  std::string got;
  EXPECT_EQ(ReadFrame(fds_[1], kMaxFrame, &got), FrameResult::kTimeout);
  SendRaw(std::string("\0\0\0\x04" "ab", 6));  // half a payload, then nothing
  EXPECT_EQ(ReadFrame(fds_[1], kMaxFrame, &got), FrameResult::kTimeout);
}

TEST_F(FrameTest, WritingToAClosedPeerIsAnErrorNotASignal) {
  ::close(fds_[1]);
  fds_[1] = ::dup(0);  // keep TearDown's close harmless
  EXPECT_EQ(WriteFrame(fds_[0], "x"), FrameResult::kError);
}

}  // namespace
}  // namespace nodevol
