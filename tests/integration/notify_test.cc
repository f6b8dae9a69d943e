// nodevold speaks systemd's notify protocol: READY=1 only once the socket
// answers (READY held back by a full notify queue while GetInfo answers), WATCHDOG=1 pings at half the watchdog interval, STOPPING=1 on
// SIGTERM. The test plays systemd's part with its own NOTIFY_SOCKET.
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sys/un.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "daemon_fixture.h"

namespace nodevol::testing {
namespace {

class NotifyTest : public DaemonFixture {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    if (root_.empty()) return;
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd_, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::string path = root_ + "/notify.sock";
    path.copy(addr.sun_path, sizeof addr.sun_path - 1);
    ASSERT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    timeval tv{0, 200000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setenv("NOTIFY_SOCKET", path.c_str(), 1);
    setenv("WATCHDOG_USEC", "200000", 1);
    unsetenv("WATCHDOG_PID");
  }
  void TearDown() override {
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    if (fd_ >= 0) close(fd_);
    DaemonFixture::TearDown();
  }
  // Collects datagrams for up to `ms`.
  std::vector<std::string> Receive(int ms) {
    std::vector<std::string> got;
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < until) {
      char buf[4096];
      ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n > 0) got.emplace_back(buf, static_cast<size_t>(n));
    }
    return got;
  }
  static int Count(const std::vector<std::string>& msgs, const std::string& what) {
    int n = 0;
    for (const std::string& m : msgs) n += m.find(what) != std::string::npos;
    return n;
  }

  int fd_ = -1;
};

TEST_F(NotifyTest, ReadyWatchdogAndStopping) {
  StartDaemon();  // returns once GetInfo answers
  std::vector<std::string> msgs = Receive(1000);
  EXPECT_EQ(Count(msgs, "READY=1"), 1);
  // 200 ms watchdog: pings every 100 ms, so well over 4 in a second.
  EXPECT_GE(Count(msgs, "WATCHDOG=1"), 4);
  EXPECT_EQ(StopDaemon(), 0);
  EXPECT_EQ(Count(Receive(300), "STOPPING=1"), 1);
}

// READY=1 is sent only once the socket answers. Seen without a race: the
// notify socket's queue is filled first, so nodevold's (blocking) send of
// READY=1 cannot complete until the test reads. If READY came before the
// socket was served, nodevold would hang in that send and GetInfo would
// never answer; in the right order GetInfo answers while READY waits.
TEST_F(NotifyTest, ReadyComesOnlyAfterTheSocketAnswers) {
  int filler = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  ASSERT_GE(filler, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string path = root_ + "/notify.sock";
  path.copy(addr.sun_path, sizeof addr.sun_path - 1);
  int queued = 0;
  while (sendto(filler, "FILL", 4, 0, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 4) ++queued;
  int err = errno;
  close(filler);
  ASSERT_TRUE(err == EAGAIN || err == EWOULDBLOCK) << std::strerror(err);
  ASSERT_GT(queued, 0);

  // Spawned by hand (StartDaemon would wait for GetInfo itself); killed
  // whatever happens below.
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      if (pid > 0) kill(pid, SIGKILL), waitpid(pid, nullptr, 0);
    }
  } daemon{SpawnDaemon()};
  ASSERT_GT(daemon.pid, 0);
  // GetInfo until it answers (each try waits for the socket; 20 s overall).
  bool answered = false;
  for (int i = 0; i < 40 && !answered; ++i) {
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    v1::GetInfoRequest req;
    v1::GetInfoResponse resp;
    answered = NewStub()->GetInfo(&ctx, req, &resp).ok();
  }
  EXPECT_TRUE(answered) << "the socket never answered while READY=1 could not be delivered: READY is sent "
                           "before the socket serves";
  // Now read: the fillers, then READY=1 (nodevold's send completes).
  std::vector<std::string> msgs;
  for (int i = 0; i < 100 && Count(msgs, "READY=1") == 0; ++i) {
    std::vector<std::string> more = Receive(200);
    msgs.insert(msgs.end(), more.begin(), more.end());
  }
  EXPECT_EQ(Count(msgs, "FILL"), queued);
  EXPECT_EQ(Count(msgs, "READY=1"), 1);
}

TEST_F(NotifyTest, NoReadyWhenStartFails) {
  std::string out, err;
  int rc = RunCommand({NODEVOLD_PATH, "--config=/dev/null", "--socket=" + socket_, "--state-dir=" + state_dir_,
                       "--pods-root=" + pods_root_, "--pool=name=default,backend=dir,path=/nonexistent/pool",
                       "--metrics-address=off", "--log-target=stderr"},
                      &out, &err);
  EXPECT_NE(rc, 0);
  EXPECT_NE(err.find("/nonexistent/pool"), std::string::npos) << err;
  std::vector<std::string> msgs = Receive(300);
  EXPECT_EQ(Count(msgs, "READY=1"), 0);
  EXPECT_EQ(Count(msgs, "STATUS=cannot start"), 1);
}

}  // namespace
}  // namespace nodevol::testing
