#include "process/run.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

namespace nodevol {
namespace {

using std::chrono::milliseconds;

RunResult MustRun(const std::vector<std::string>& argv, RunOptions o = {}) {
  RunResult r;
  Status st = ::nodevol::Run(argv, o, &r);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return r;
}

TEST(Run, OutputAndExitCode) {
  RunResult r = MustRun({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_FALSE(r.success());
  EXPECT_EQ(r.Describe(), "exit 3: err");
}

TEST(Run, ArgumentsAreNotInterpreted) {
  RunResult r = MustRun({"/bin/echo", "$(id)", "a b", ";", "*"});
  EXPECT_EQ(r.out, "$(id) a b ; *\n");
}

TEST(Run, MinimalEnvironmentPlusExtras) {
  ::setenv("NODEVOL_SECRET_TEST", "leak", 1);
  RunOptions o;
  o.env = {"DM_DISABLE_UDEV=1"};
  RunResult r = MustRun({"/usr/bin/env"}, o);
  ::unsetenv("NODEVOL_SECRET_TEST");
  EXPECT_NE(r.out.find("LC_ALL=C\n"), std::string::npos);
  EXPECT_NE(r.out.find("DM_DISABLE_UDEV=1\n"), std::string::npos);
  EXPECT_NE(r.out.find("PATH=/usr/sbin:/usr/bin:/sbin:/bin\n"), std::string::npos);
  EXPECT_EQ(r.out.find("NODEVOL_SECRET_TEST"), std::string::npos);
}

TEST(Run, OnlyStandardDescriptorsReachTheChild) {
  int leak = ::open("/dev/null", O_RDONLY);  // deliberately without O_CLOEXEC
  ASSERT_GE(leak, 3);
  RunResult r = MustRun({"/bin/ls", "/proc/self/fd"});
  ::close(leak);
  // 0, 1, 2 and ls's own directory fd: the leaked one is not there.
  int count = 0;
  for (char c : r.out) count += c == '\n';
  EXPECT_EQ(count, 4) << r.out;
}

TEST(Run, Input) {
  RunOptions o;
  o.input = std::string(200000, 'x');  // larger than a pipe buffer
  RunResult r = MustRun({"/usr/bin/wc", "-c"}, o);
  EXPECT_EQ(r.out, "200000\n");
}

TEST(Run, DescribeQuotesTheErrorNotAUsageTextOrHint) {
  // mkfs.xfs prints the error, then its usage; lvm ends with a hint.
  RunResult r = MustRun({"/bin/sh", "-c", "echo 'Filesystem must be larger than 300MB.' >&2; "
                                          "echo 'Usage: mkfs.xfs' >&2; echo '  [-b size=num]' >&2; exit 1"});
  EXPECT_EQ(r.Describe(), "exit 1: Filesystem must be larger than 300MB.");
  r = MustRun({"/bin/sh", "-c", "echo '  Option --x is unsupported with thin pools.' >&2; "
                                "echo \"  Run \\`lvcreate --help' for more information.\" >&2; exit 3"});
  EXPECT_EQ(r.Describe(), "exit 3: Option --x is unsupported with thin pools.");
}

TEST(Run, TimeoutKillsTheWholeGroupAndReturnsOnTime) {
  RunOptions o;
  o.timeout = milliseconds(300);
  auto start = std::chrono::steady_clock::now();
  char pid_file[] = "/tmp/nodevol-run-test-XXXXXX";
  ::close(::mkstemp(pid_file));
  RunResult r = MustRun({"/bin/sh", "-c", std::string("sleep 30 & echo $! > ") + pid_file + "; sleep 30"}, o);
  auto took = std::chrono::steady_clock::now() - start;
  // The background sleep was killed with its group: gone, or a zombie
  // waiting for whoever reaps orphans here.
  std::string pid;
  {
    FILE* f = ::fopen(pid_file, "r");
    char buf[32] = {};
    if (f && ::fgets(buf, sizeof buf, f)) pid = buf;
    if (f) ::fclose(f);
    ::unlink(pid_file);
  }
  ASSERT_FALSE(pid.empty());
  pid.erase(pid.find_last_not_of("\n") + 1);
  ::usleep(100000);
  FILE* stat = ::fopen(("/proc/" + pid + "/stat").c_str(), "r");
  if (stat) {
    char buf[256] = {};
    bool read = ::fgets(buf, sizeof buf, stat) != nullptr;
    ::fclose(stat);
    ASSERT_TRUE(read) << "cannot read /proc/" << pid << "/stat";
    std::string line = buf;
    EXPECT_NE(line.find(") Z"), std::string::npos) << "background child still alive: " << line;
  }
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.success());
  EXPECT_LT(took, std::chrono::seconds(3));
  RunResult check;
  EXPECT_EQ(RunChecked({"/bin/sh", "-c", "sleep 30"}, o, &check).code(), Status::Code::kDeadlineExceeded);
}

TEST(Run, ChildLeavingABackgroundProcessDoesNotHoldUsUp) {
  RunOptions o;
  o.timeout = milliseconds(5000);
  auto start = std::chrono::steady_clock::now();
  RunResult r = MustRun({"/bin/sh", "-c", "sleep 3 & echo started"}, o);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "started\n");
}

TEST(Run, SignalAndStartFailures) {
  RunResult r = MustRun({"/bin/sh", "-c", "kill -9 $$"});
  EXPECT_EQ(r.term_signal, 9);
  EXPECT_EQ(r.Describe(), "killed by signal 9");
  EXPECT_FALSE(::nodevol::Run({"/nonexistent/tool"}, {}, &r).ok());
  EXPECT_FALSE(::nodevol::Run({"relative"}, {}, &r).ok());
  Status st = RunChecked({"/bin/sh", "-c", "echo 'lvcreate: no space' >&2; exit 5"}, {}, &r);
  EXPECT_EQ(st.code(), Status::Code::kInternal);
  EXPECT_EQ(st.message(), "sh exit 5: lvcreate: no space");
}

TEST(Run, OutputIsCapped) {
  RunOptions o;
  o.max_output = 1000;
  RunResult r = MustRun({"/bin/sh", "-c", "head -c 100000 /dev/zero"}, o);
  EXPECT_LT(r.out.size(), 1100u);
  EXPECT_NE(r.out.find("[output truncated]"), std::string::npos);
  EXPECT_EQ(r.exit_code, 0);
}

}  // namespace
}  // namespace nodevol
