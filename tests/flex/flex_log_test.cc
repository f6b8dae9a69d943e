// Where the driver's diagnostics go: syslog (the journal's /dev/log), never
// stdout/stderr, and never with a secret in them. The driver runs with a
// private /dev whose /dev/log is a datagram socket the test reads.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "flex_fixture.h"

namespace nodevol::testing {
namespace {

constexpr char kSecretPlain[] = "pa55-w0rd&more";
constexpr char kSecretB64[] = "cGE1NS13MHJkJm1vcmU=";  // base64 of kSecretPlain

class FlexLogTest : public FlexTest {
 protected:
  void SetUp() override {
    FlexTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    log_socket_ = root_ + "/devlog.sock";
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", log_socket_.c_str());
    ASSERT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    int big = 1 << 20;
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  }
  void TearDown() override {
    if (fd_ >= 0) ::close(fd_);
    FlexTest::TearDown();
  }
  FlexResult Logged(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {}) {
    FlexResult r = RunExe(NODEVOL_FLEX_PATH, args, Env(env), Capture::kSeparate, std::chrono::seconds(60), log_socket_);
    EXPECT_NE(r.exit_code, 126) << "could not set up the private /dev";
    EXPECT_EQ(r.err, "") << args[0];
    return r;
  }
  std::vector<std::string> Drain() {
    std::vector<std::string> lines;
    char buf[8192];
    for (ssize_t n; (n = ::recv(fd_, buf, sizeof buf, 0)) > 0;) lines.emplace_back(buf, static_cast<size_t>(n));
    return lines;
  }
  std::string log_socket_;
  int fd_ = -1;
};

TEST_F(FlexLogTest, CallsAreLoggedToSyslogWithoutSecrets) {
  ASSERT_TRUE(CreateVolume("pv-log", 1 << 20).ok());
  std::string target = MakeTarget(kPod1, "pv-log");
  Options opts = MountOptions(kPod1, "pv-log", {{"volume", "pv-log"}, {"kubernetes.io/secret/password", kSecretB64}});
  EXPECT_TRUE(HasStatus(Logged({"mount", target, KubeletJson(opts)}), "Success"));
  std::string ghost = MakeTarget(kPod2, "pv-ghost");
  Options bad = MountOptions(kPod2, "pv-ghost", {{"volume", "pv-ghost"}, {"kubernetes.io/secret/password", kSecretB64}});
  EXPECT_TRUE(HasStatus(Logged({"mount", ghost, KubeletJson(bad)}), "Failure"));
  bad["kubernetes.io/mounterArgs.FsGroup"] = "x";
  EXPECT_TRUE(HasStatus(Logged({"mount", ghost, KubeletJson(bad)}), "Failure"));
  EXPECT_TRUE(HasStatus(Logged({"unmount", target}), "Success"));
  StopDaemon();  // gRPC's own complaints must go to syslog too, not stderr
  FlexResult down = Logged({"mount", target, KubeletJson(opts)}, {{"NODEVOL_FLEX_TIMEOUT", "1s"}});
  EXPECT_TRUE(HasStatus(down, "Failure"));
  EXPECT_NE(down.message().find(socket_), std::string::npos) << Describe(down);

  std::vector<std::string> lines = Drain();
  bool failure_logged = false;
  for (const std::string& l : lines) {
    EXPECT_EQ(l.find(kSecretPlain), std::string::npos) << l;
    EXPECT_EQ(l.find(kSecretB64), std::string::npos) << l;
    if (l.find(ghost) != std::string::npos) failure_logged = true;
  }
  EXPECT_GE(lines.size(), 5u) << "calls are not logged to syslog";
  EXPECT_TRUE(failure_logged) << "the failed mount of " << ghost << " is not in the log";
}

}  // namespace
}  // namespace nodevol::testing
