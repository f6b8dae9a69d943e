// RunWithoutCapability (process/without_capability.h): the function runs
// on a thread without the capability, everything else keeps it; and, on a
// real filesystem with project quotas (the VM's vm_dir_quota_*), what that
// is for: a write charged to a project stops at the project's hard limit
// only without CAP_SYS_RESOURCE on ext4.
#include "process/without_capability.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "backend/dir/project_quota.h"
#include "base/call_scope.h"

namespace nodevol {
namespace {

// CAP_CHOWN, which root holds even in the containers CI runs in (some of
// which withhold CAP_SYS_RESOURCE itself); the VM's root holds both.
TEST(RunWithoutCapability, OnlyTheFunctionsThreadLacksIt) {
  if (!HasEffectiveCapability(CAP_CHOWN)) GTEST_SKIP() << "needs CAP_CHOWN to drop (root)";
  bool inside = true, other_thread = true, fowner = false;
  std::thread::id ran_on;
  Status st = RunWithoutCapability(CAP_CHOWN, [&] {
    inside = HasEffectiveCapability(CAP_CHOWN);
    fowner = HasEffectiveCapability(CAP_FOWNER);
    ran_on = std::this_thread::get_id();
    // A thread it starts gets its sets: without the capability too.
    std::thread([&] { other_thread = HasEffectiveCapability(CAP_CHOWN); }).join();
    return Status::NotFound("the function's own status");
  });
  EXPECT_EQ(st.code(), Status::Code::kNotFound) << st.ToString();
  EXPECT_EQ(st.message(), "the function's own status");
  EXPECT_FALSE(inside);
  EXPECT_FALSE(other_thread);
  EXPECT_TRUE(fowner) << "another capability went too";
  EXPECT_NE(ran_on, std::this_thread::get_id());
  EXPECT_TRUE(HasEffectiveCapability(CAP_CHOWN)) << "the caller's thread lost it";
  // And again: the process keeps it for later work.
  ASSERT_TRUE(RunWithoutCapability(CAP_CHOWN, [] { return Status::Ok(); }).ok());
  EXPECT_TRUE(HasEffectiveCapability(CAP_CHOWN));
}

TEST(RunWithoutCapability, KeepsTheOtherCapabilitiesAndTheCallersDeadline) {
  const auto deadline = CallScope::Clock::now() + std::chrono::seconds(42);
  CallScope scope(deadline, "Snapshot");
  bool chown = false;
  CallScope::Clock::time_point seen;
  std::string what;
  ASSERT_TRUE(RunWithoutCapability(CAP_SYS_RESOURCE, [&] {
                chown = HasEffectiveCapability(CAP_CHOWN);
                seen = CallScope::Deadline();
                what = CallScope::What();
                return Status::Ok();
              }).ok());
  EXPECT_EQ(chown, HasEffectiveCapability(CAP_CHOWN));
  EXPECT_EQ(seen, deadline);
  EXPECT_EQ(what, "Snapshot");
}

TEST(RunWithoutCapability, NoSuchCapabilityRunsNothing) {
  bool ran = false;
  Status st = RunWithoutCapability(99, [&] {
    ran = true;
    return Status::Ok();
  });
  EXPECT_EQ(st.code(), Status::Code::kInternal) << st.ToString();
  EXPECT_FALSE(ran);
}

// On a filesystem with project quotas enforced (NODEVOL_REAL_QUOTA_DIR, a
// directory on it; vm_dir_quota_ext4 and _xfs set it): 4 MiB written into
// a project limited to 1 MiB.
Status WriteMiB(const std::string& path, int mib) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno("open " + path, errno);
  std::string chunk(1 << 20, 'q');
  Status st;
  // A short write (the limit reached inside a chunk) is followed by the
  // one that fails with the reason.
  for (int i = 0; i < mib && st.ok(); ++i) {
    for (size_t done = 0; done < chunk.size() && st.ok();) {
      ssize_t n = ::write(fd, chunk.data() + done, chunk.size() - done);
      if (n < 0) st = Status::FromErrno("write " + path, errno);
      else done += static_cast<size_t>(n);
    }
  }
  if (st.ok() && ::fsync(fd) != 0) st = Status::FromErrno("fsync " + path, errno);
  ::close(fd);
  return st;
}

TEST(RealQuota, AWriteWithoutCapSysResourceStopsAtTheProjectsHardLimit) {
  const char* base = std::getenv("NODEVOL_REAL_QUOTA_DIR");
  if (!base) GTEST_SKIP() << "only in the VM (NODEVOL_REAL_QUOTA_DIR unset)";
  const std::string dir = std::string(base) + "/real-quota-" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0) << std::strerror(errno);
  const uint32_t id = 900000 + static_cast<uint32_t>(::getpid() % 10000);
  ASSERT_TRUE(SetProjectId(dir, id).ok());
  ASSERT_TRUE(SetProjectLimit(dir, id, 1 << 20).ok());
  Status st = RunWithoutCapability(CAP_SYS_RESOURCE, [&] { return WriteMiB(dir + "/bounded", 4); });
  EXPECT_FALSE(st.ok()) << "4 MiB written into a project limited to 1 MiB without CAP_SYS_RESOURCE";
  // ext4 says EDQUOT, xfs ENOSPC for a project's limit.
  EXPECT_TRUE(st.message().find(std::strerror(EDQUOT)) != std::string::npos ||
              st.message().find(std::strerror(ENOSPC)) != std::string::npos)
      << st.ToString();
  struct stat sb;
  ASSERT_EQ(::stat((dir + "/bounded").c_str(), &sb), 0);
  EXPECT_LE(sb.st_size, 2 << 20);
  // Why it runs that way: with the capability, ext4 lets root through (xfs
  // does not). Shown, so this test fails if the reason ever goes away.
  struct statfs fs;
  ASSERT_EQ(::statfs(dir.c_str(), &fs), 0);
  Status with = WriteMiB(dir + "/root", 4);
  if (fs.f_type == EXT4_SUPER_MAGIC) {
    EXPECT_TRUE(with.ok()) << "ext4 kept root with CAP_SYS_RESOURCE to the limit too: " << with.ToString();
  }
  std::printf("    with CAP_SYS_RESOURCE (%s): %s\n", fs.f_type == EXT4_SUPER_MAGIC ? "ext4" : "xfs",
              with.ok() ? "4 MiB written past the limit" : with.ToString().c_str());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace nodevol
