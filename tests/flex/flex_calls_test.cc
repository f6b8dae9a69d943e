// The calls kubelet makes besides mount/unmount, argv errors, and the
// driver's behaviour when nodevold is down or hangs: always one JSON object,
// nothing on stderr, within the deadline, no process or descriptor left.
#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "flex_fixture.h"

namespace nodevol::testing {
namespace {

using std::chrono::milliseconds;

TEST(FlexInit, CapabilitiesAreExactBooleans) {
  // init must not need the daemon: kubelet probes whenever the plugin dir changes.
  FlexResult r = RunFlex({"init"}, {{"NODEVOL_FLEX_SOCKET", "/nonexistent/nodevold.sock"},
                                    {"NODEVOL_FLEX_CONFIG", "/nonexistent"}});
  ASSERT_TRUE(HasStatus(r, "Success"));
  ASSERT_TRUE(r.json.contains("capabilities"));
  const nlohmann::json& caps = r.json["capabilities"];
  ASSERT_TRUE(caps.is_object()) << r.output;
  // A string ("false") makes kubelet skip the driver; a missing key keeps a
  // default that is wrong for us (attach, fsGroup, supportsMetrics).
  for (const char* key : {"attach", "selinuxRelabel", "supportsMetrics", "fsGroup", "requiresFSResize"}) {
    ASSERT_TRUE(caps.contains(key)) << key << " missing: " << r.output;
    EXPECT_TRUE(caps[key].is_boolean()) << key << ": " << r.output;
  }
  for (const auto& [key, value] : caps.items()) EXPECT_TRUE(value.is_boolean()) << key << ": " << r.output;
  EXPECT_EQ(caps["attach"], false);
  EXPECT_EQ(caps["fsGroup"], false);  // nodevold applies fsGroup at Publish
  EXPECT_EQ(caps["supportsMetrics"], true);
  EXPECT_EQ(caps["requiresFSResize"], true);
  EXPECT_EQ(caps["selinuxRelabel"], true);

  FlexResult sep = RunFlex({"init"}, {{"NODEVOL_FLEX_CONFIG", "/nonexistent"}}, Capture::kSeparate);
  EXPECT_EQ(sep.err, "");
  EXPECT_EQ(sep.exit_code, 0);
}

TEST(FlexArgs, AttachFamilyIsNotSupportedWithExitZero) {
  const std::string json = KubeletJson({{"kubernetes.io/fsType", ""},
                                        {"kubernetes.io/pvOrVolumeName", "pv-a"},
                                        {"kubernetes.io/readwrite", "rw"},
                                        {"volume", "pv-a"}});
  const std::vector<std::vector<std::string>> calls = {
      {"getvolumename", json},
      {"attach", json, "node-1"},
      {"detach", "pv-a", "node-1"},
      {"waitforattach", "/dev/sdx", json},
      {"isattached", json, "node-1"},
      {"mountdevice", "/var/lib/kubelet/plugins/x", "/dev/sdx", json},
      {"unmountdevice", "/var/lib/kubelet/plugins/x"},
      {"expandvolume", json, "/var/lib/kubelet/plugins/x", "2097152", "1048576"},
  };
  for (const auto& argv : calls) {
    FlexResult r = RunFlex(argv, {{"NODEVOL_FLEX_CONFIG", "/nonexistent"}});
    EXPECT_TRUE(HasStatus(r, "Not supported")) << argv[0];
    FlexResult sep = RunFlex(argv, {{"NODEVOL_FLEX_CONFIG", "/nonexistent"}}, Capture::kSeparate);
    EXPECT_EQ(sep.err, "") << argv[0];
    EXPECT_EQ(sep.output, r.output) << argv[0] << ": kubelet caches the answer, it must be stable";
  }
}

TEST(FlexArgs, BadArgvGetsAFailureObject) {
  const std::string json = KubeletJson({{"volume", "pv-a"}});
  const std::vector<std::vector<std::string>> calls = {
      {},                                        // no arguments at all
      {"frobnicate"},                            // unknown call
      {"frobnicate", json},
      {"mount"},                                 // missing target and json
      {"mount", "/var/lib/kubelet/pods/u/volumes/nodevol.io~volume/v"},  // missing json
      {"mount", "/var/lib/kubelet/pods/u/volumes/nodevol.io~volume/v", "{not json"},
      {"mount", "/var/lib/kubelet/pods/u/volumes/nodevol.io~volume/v", "[\"an\",\"array\"]"},
      {"unmount"},
      {"unmount", "/a", "/b"},                   // extra argument
      {"expandfs", json, "", "/t", "2097152"},  // missing oldBytes
      {"init", "extra"},
  };
  for (const auto& argv : calls) {
    std::string what = argv.empty() ? "(no args)" : argv[0] + " with " + std::to_string(argv.size() - 1) + " args";
    FlexResult r = RunFlex(argv, {{"NODEVOL_FLEX_CONFIG", "/nonexistent"}});
    EXPECT_TRUE(HasStatus(r, "Failure")) << what;
    EXPECT_FALSE(r.message().empty()) << what;
    FlexResult sep = RunFlex(argv, {{"NODEVOL_FLEX_CONFIG", "/nonexistent"}}, Capture::kSeparate);
    EXPECT_EQ(sep.err, "") << what;
  }
}

TEST(FlexArgs, AttachFamilyIsNotSupportedWhateverTheArguments) {
  // kubelet caches "Not supported" per plugin object until the next probe,
  // so the answer must not depend on anything but the call's name.
  const std::string json = KubeletJson({{"volume", "pv-a"}});
  const std::vector<std::vector<std::string>> calls = {
      {"getvolumename"},          {"attach", json},           {"detach", "pv-a"},
      {"waitforattach", json},    {"isattached", json},       {"mountdevice", "/x", "/dev/sdx"},
      {"unmountdevice"},          {"unmountdevice", "/x", "/y"}, {"expandvolume", json, "/x", "2097152"},
  };
  for (const auto& argv : calls) {
    FlexResult r = RunFlex(argv, {{"NODEVOL_FLEX_CONFIG", "/nonexistent"}});
    EXPECT_TRUE(HasStatus(r, "Not supported")) << argv[0] << " with " << argv.size() - 1 << " args";
  }
}

class FlexDaemonDownTest : public FlexTest {
 protected:
  // kubelet's mount of pv-a at target, the driver pointed at socket, 2 s.
  FlexResult MountVia(const std::string& socket, const std::string& target) {
    std::string json = KubeletJson(MountOptions(kPod1, "pv-a", {{"volume", "pv-a"}}));
    return RunFlex({"mount", target, json}, Env({{"NODEVOL_FLEX_SOCKET", socket}, {"NODEVOL_FLEX_TIMEOUT", "2s"}}),
                   Capture::kSeparate);
  }
  void ExpectUnreachableFailure(const FlexResult& r, const std::string& socket) {
    // Returning at all shows the deadline: the daemon never answers. (No
    // bound in time, which only adds flakes: issue 68 item 10.)
    EXPECT_TRUE(HasStatus(r, "Failure"));
    EXPECT_NE(r.message().find(socket), std::string::npos) << Describe(r);
    EXPECT_NE(r.message().find("systemctl status nodevold"), std::string::npos) << Describe(r);
    EXPECT_EQ(r.err, "");
  }
};

TEST_F(FlexDaemonDownTest, StoppedDaemonFailsFastNamingTheSocket) {
  ASSERT_TRUE(CreateVolume("pv-a", 1 << 20).ok());
  std::string target = MakeTarget(kPod1, "pv-a");
  ASSERT_EQ(StopDaemon(), 0);
  const std::map<std::string, std::string> two_s = {{"NODEVOL_FLEX_TIMEOUT", "2s"}};
  std::string json = KubeletJson(MountOptions(kPod1, "pv-a", {{"volume", "pv-a"}}));
  ExpectUnreachableFailure(Flex({"mount", target, json}, two_s, Capture::kSeparate), socket_);
  ExpectUnreachableFailure(Flex({"mount", target, json}, two_s), socket_);
  EXPECT_FALSE(IsMountPoint(target));
  ExpectUnreachableFailure(Flex({"unmount", target}, two_s, Capture::kSeparate), socket_);
  ExpectUnreachableFailure(
      Flex({"expandfs", json, "", target, "2097152", "1048576"}, two_s, Capture::kSeparate), socket_);
}

// A unix socket listening at path, never accepting; its fd, or -1.
int ListeningSocket(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 16) != 0) return -1;
  return fd;
}

// A listening socket whose connections are queued by the kernel but never
// accepted: connect succeeds, no answer ever comes. It is made where the
// driver dials for a daemon socket of `path`: the flex door, "<path>.flex".
// Returns its fd.
int SilentSocket(const std::string& path) { return ListeningSocket(path + ".flex"); }

TEST_F(FlexDaemonDownTest, SocketNobodyAcceptsFromFailsWithinTheDeadline) {
  std::string path = root_ + "/silent.sock";
  int fd = SilentSocket(path);
  ASSERT_GE(fd, 0);
  std::string target = MakeTarget(kPod1, "pv-a");
  FlexResult r = MountVia(path, target);
  ::close(fd);
  ExpectUnreachableFailure(r, path);
  EXPECT_FALSE(IsMountPoint(target));
}

// A daemon older than the driver (0.1.0 served the Node API socket but no
// flex door), as when a driver went in before the upgrade restarted the
// daemon: the answer says so and what to do, not "the socket does not exist".
TEST_F(FlexDaemonDownTest, DaemonWithoutADoorIsNamedOlderThanTheDriver) {
  std::string path = root_ + "/old.sock";
  int fd = ListeningSocket(path);
  ASSERT_GE(fd, 0);
  std::string target = MakeTarget(kPod1, "pv-a");
  FlexResult r = MountVia(path, target);
  ::close(fd);
  EXPECT_TRUE(HasStatus(r, "Failure")) << Describe(r);
  EXPECT_NE(r.message().find("older than this driver"), std::string::npos) << Describe(r);
  EXPECT_NE(r.message().find("systemctl restart nodevold"), std::string::npos) << Describe(r);
  EXPECT_FALSE(IsMountPoint(target));
}

TEST_F(FlexDaemonDownTest, FrozenDaemonFailsWithinTheDeadline) {
  ASSERT_TRUE(CreateVolume("pv-a", 1 << 20).ok());
  std::string target = MakeTarget(kPod1, "pv-a");
  std::string json = KubeletJson(MountOptions(kPod1, "pv-a", {{"volume", "pv-a"}}));
  ASSERT_EQ(::kill(daemon_pid(), SIGSTOP), 0);
  FlexResult r = Flex({"mount", target, json}, {{"NODEVOL_FLEX_TIMEOUT", "2s"}}, Capture::kSeparate);
  FlexResult u = Flex({"unmount", target}, {{"NODEVOL_FLEX_TIMEOUT", "2s"}});
  ::kill(daemon_pid(), SIGCONT);
  ExpectUnreachableFailure(r, socket_);
  EXPECT_TRUE(HasStatus(u, "Failure"));
}

TEST_F(FlexDaemonDownTest, DaemonKilledMidCallGivesOneFailureObject) {
  ASSERT_TRUE(CreateVolume("pv-a", 1 << 20).ok());
  std::string target = MakeTarget(kPod1, "pv-a");
  std::string json = KubeletJson(MountOptions(kPod1, "pv-a", {{"volume", "pv-a"}}));
  ASSERT_EQ(::kill(daemon_pid(), SIGSTOP), 0);  // the call is in flight, unanswered
  FlexResult r;
  std::thread call([&] { r = Flex({"mount", target, json}, {{"NODEVOL_FLEX_TIMEOUT", "10s"}}, Capture::kSeparate); });
  std::this_thread::sleep_for(milliseconds(500));
  KillDaemon();
  call.join();
  EXPECT_TRUE(HasStatus(r, "Failure"));
  EXPECT_EQ(r.err, "");
  EXPECT_FALSE(IsMountPoint(target));
}

TEST_F(FlexDaemonDownTest, ConfigFileSetsSocketAndTimeoutAndEnvironmentWins) {
  ASSERT_TRUE(CreateVolume("pv-a", 1 << 20).ok());
  std::string conf = root_ + "/flex.conf";
  std::ofstream(conf) << "# written by the test\nsocket = " << socket_ << "\ntimeout = 30s\n";
  std::string target = MakeTarget(kPod1, "pv-a");
  std::string json = KubeletJson(MountOptions(kPod1, "pv-a", {{"volume", "pv-a"}}));
  FlexResult r = RunFlex({"mount", target, json}, {{"NODEVOL_FLEX_CONFIG", conf}});
  EXPECT_TRUE(HasStatus(r, "Success"));
  EXPECT_TRUE(IsMountPoint(target));

  // A silent socket and a short timeout from the file; then the environment's
  // socket overriding the file's.
  std::string silent = root_ + "/silent.sock";
  int fd = SilentSocket(silent);
  ASSERT_GE(fd, 0);
  std::ofstream(conf) << "socket = " << silent << "\ntimeout = 500ms\n";
  r = RunFlex({"unmount", target}, {{"NODEVOL_FLEX_CONFIG", conf}}, Capture::kSeparate);
  EXPECT_TRUE(HasStatus(r, "Failure"));
  // The file's 500 ms, not the default 30 s: a bound far from both.
  EXPECT_LT(r.elapsed, milliseconds(15000)) << Describe(r);
  EXPECT_NE(r.message().find(silent), std::string::npos) << Describe(r);
  EXPECT_EQ(r.err, "");
  r = RunFlex({"unmount", target}, {{"NODEVOL_FLEX_CONFIG", conf}, {"NODEVOL_FLEX_SOCKET", socket_}});
  ::close(fd);
  EXPECT_TRUE(HasStatus(r, "Success"));
  EXPECT_FALSE(IsMountPoint(target));
}

// Children of this process other than nodevold (zombies included).
std::vector<pid_t> OurChildren(pid_t except) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  while (dirent* e = d ? ::readdir(d) : nullptr) {
    pid_t pid = std::atoi(e->d_name);
    if (pid <= 0 || pid == except) continue;
    std::ifstream stat("/proc/" + std::string(e->d_name) + "/stat");
    std::string line;
    std::getline(stat, line);
    size_t paren = line.rfind(')');
    if (paren == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(line.c_str() + paren + 1, " %c %d", &state, &ppid) == 2 && ppid == ::getpid()) out.push_back(pid);
  }
  if (d) ::closedir(d);
  return out;
}

TEST_F(FlexDaemonDownTest, LeavesNoProcessesAndClosesItsOutputAtExit) {
  // As a subreaper, anything the driver forks and abandons becomes our child.
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  ASSERT_TRUE(CreateVolume("pv-a", 1 << 20).ok());
  std::string target = MakeTarget(kPod1, "pv-a");
  std::string json = KubeletJson(MountOptions(kPod1, "pv-a", {{"volume", "pv-a"}}));
  std::vector<FlexResult> runs = {Flex({"init"}), Flex({"mount", target, json}), Flex({"unmount", target}),
                                  Flex({"attach", json, "node-1"}), Flex({"frobnicate"})};
  StopDaemon();
  runs.push_back(Flex({"mount", target, json}, {{"NODEVOL_FLEX_TIMEOUT", "1s"}}));
  for (const FlexResult& r : runs) {
    EXPECT_FALSE(r.pipe_held) << Describe(r);
    EXPECT_FALSE(r.timed_out) << Describe(r);
  }
  std::this_thread::sleep_for(milliseconds(200));
  std::vector<pid_t> left = OurChildren(-1);
  for (pid_t p : left) ::waitpid(p, nullptr, WNOHANG);
  EXPECT_TRUE(left.empty()) << left.size() << " process(es) left behind, first pid " << (left.empty() ? 0 : left[0]);
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
}

}  // namespace
}  // namespace nodevol::testing
