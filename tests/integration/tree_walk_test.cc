// Root walking trees a pod controls (issue 25, item 1): the fsGroup walk at
// Publish and the dir backend's delete, against the real daemon.
// - A pod swapping an entry of its volume with a symlink to a host
//   directory (renameat2 RENAME_EXCHANGE in a loop) while Publish applies
//   a new fsGroup, again and again: the host directory and its files keep
//   owner, group and mode.
// - A directory chain deeper than PATH_MAX: fsGroup reaches its bottom and
//   DeleteVolume removes it (path-based walks fail with ENAMETOOLONG and
//   leave the volume stuck in DELETING).
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <filesystem>
#include <fstream>
#include <thread>

#include "daemon_fixture.h"

namespace nodevol::testing {
namespace {

namespace fs = std::filesystem;

constexpr char kLink[] = "l";  // swapped with "d" by the attacker

class TreeWalkTest : public DaemonFixture {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    StartDaemon();
  }

  std::string DataDir(const std::string& name) { return GetVolume(name).attributes().at("path"); }

  grpc::Status PublishWithGroup(const std::string& volume, const std::string& target, uint32_t gid) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::PublishRequest req;
    req.set_volume(volume);
    req.set_target(target);
    req.set_fs_group(gid);
    v1::PublishResponse resp;
    return stub()->Publish(&ctx, req, &resp);
  }
};

// Owner, group and mode of a path (not following a symlink).
std::string Attrs(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return "missing";
  char buf[64];
  snprintf(buf, sizeof buf, "%u:%u %04o", st.st_uid, st.st_gid, st.st_mode & 07777);
  return buf;
}

// Makes a chain of `depth` directories named `name` below dir, by
// descriptors (a path to its bottom would be longer than PATH_MAX).
void MakeChain(const std::string& dir, const char* name, int depth) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << dir;
  for (int i = 0; i < depth; ++i) {
    ASSERT_EQ(::mkdirat(fd, name, 0755), 0) << "level " << i << ": " << strerror(errno);
    int next = ::openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    ::close(fd);
    ASSERT_GE(next, 0) << "level " << i;
    fd = next;
  }
  ASSERT_EQ(::close(::openat(fd, "bottom-file", O_CREAT | O_WRONLY | O_CLOEXEC, 0600)), 0);
  ::close(fd);
}

// The stat of dir/name/name/.../bottom-file, `depth` levels down.
bool StatChainBottom(const std::string& dir, const char* name, int depth, struct stat* st) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (int i = 0; fd >= 0 && i < depth; ++i) {
    int next = ::openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    ::close(fd);
    fd = next;
  }
  bool ok = fd >= 0 && ::fstatat(fd, "bottom-file", st, AT_SYMLINK_NOFOLLOW) == 0;
  if (fd >= 0) ::close(fd);
  return ok;
}

TEST_F(TreeWalkTest, FsGroupWalkNeverChangesWhatASwappedSymlinkPointsTo) {
  // The host's directory: root-owned, private, with a private file.
  std::string outside = root_ + "/host-secrets";
  ASSERT_EQ(::mkdir(outside.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(outside.c_str(), 0700), 0);
  std::ofstream(outside + "/key") << "secret";
  ASSERT_EQ(::chmod((outside + "/key").c_str(), 0600), 0);
  ASSERT_EQ(::chown(outside.c_str(), 0, 0), 0);
  const std::string dir_before = Attrs(outside), file_before = Attrs(outside + "/key");
  ASSERT_EQ(dir_before, "0:0 0700");

  // The pod's volume: a directory "d" with files, and a symlink to the host's.
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string data = DataDir("v1");
  ASSERT_EQ(::mkdir((data + "/d").c_str(), 0755), 0);
  for (int i = 0; i < 50; ++i) std::ofstream(data + "/d/f" + std::to_string(i)) << i;
  ASSERT_EQ(::symlink(outside.c_str(), (data + "/" + kLink).c_str()), 0);

  // The pod: swaps "d" and the symlink as fast as it can.
  std::atomic<bool> stop{false};
  std::atomic<long> swaps{0};
  std::thread attacker([&] {
    int fd = ::open(data.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    while (fd >= 0 && !stop.load()) {
      if (::renameat2(fd, "d", fd, kLink, RENAME_EXCHANGE) == 0) swaps.fetch_add(1);
    }
    if (fd >= 0) ::close(fd);
  });

  // Another pod of the same claim, published again and again with a new
  // fsGroup each time (so every Publish walks the tree).
  std::string t = MakeTarget("pod-1", "data");
  int rounds = 0;
  for (; rounds < 300 && Attrs(outside) == dir_before && Attrs(outside + "/key") == file_before; ++rounds) {
    grpc::Status st = PublishWithGroup("v1", t, 5000 + rounds);
    ASSERT_TRUE(st.ok()) << "round " << rounds << ": " << st.error_message();
    ASSERT_TRUE(Unpublish(t).ok());
  }
  stop = true;
  attacker.join();
  EXPECT_GT(swaps.load(), rounds) << "the attacker hardly ran";
  EXPECT_EQ(Attrs(outside), dir_before) << "after " << rounds << " publications";
  EXPECT_EQ(Attrs(outside + "/key"), file_before) << "after " << rounds << " publications";
  // And the walk still did its job inside the volume.
  struct stat st;
  ASSERT_EQ(::stat(data.c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, static_cast<gid_t>(5000 + rounds - 1));
  EXPECT_TRUE(st.st_mode & S_ISGID);
}

TEST_F(TreeWalkTest, FsGroupReachesTheBottomOfAChainDeeperThanPathMax) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string data = DataDir("v1");
  const int depth = 2 * PATH_MAX / 9 + 10;  // "abcdefgh/" per level: twice PATH_MAX
  MakeChain(data, "abcdefgh", depth);
  if (HasFatalFailure()) return;
  std::string t = MakeTarget("pod-1", "data");
  grpc::Status st = PublishWithGroup("v1", t, 4242);
  ASSERT_TRUE(st.ok()) << st.error_message();
  struct stat bottom;
  ASSERT_TRUE(StatChainBottom(data, "abcdefgh", depth, &bottom));
  EXPECT_EQ(bottom.st_gid, 4242u);
  EXPECT_EQ(bottom.st_mode & 0777, 0660u) << std::oct << bottom.st_mode;
  ASSERT_TRUE(Unpublish(t).ok());
  grpc::Status del = DeleteVolume("v1");
  EXPECT_TRUE(del.ok()) << del.error_message();
}

TEST_F(TreeWalkTest, DeleteVolumeRemovesAChainDeeperThanPathMax) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string data = DataDir("v1");
  const int depth = 2 * PATH_MAX / 9 + 10;
  MakeChain(data, "abcdefgh", depth);
  if (HasFatalFailure()) return;
  // Siblings at several levels, so the walk goes back up and on.
  std::ofstream(data + "/top-file") << "x";
  fs::create_directories(data + "/abcdefgh/abcdefgh/side/dir");
  std::ofstream(data + "/abcdefgh/abcdefgh/side/dir/file") << "y";
  std::string outside = root_ + "/host-dir";
  fs::create_directories(outside);
  std::ofstream(outside + "/keep") << "z";
  ASSERT_EQ(::symlink(outside.c_str(), (data + "/abcdefgh/host-link").c_str()), 0);

  grpc::Status st = DeleteVolume("v1");
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(ListVolumes().empty());
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(pool_dir_)) left.push_back(e.path().filename());
  EXPECT_TRUE(left.empty()) << "left in the pool: " << left.front();
  EXPECT_TRUE(fs::exists(outside + "/keep")) << "the delete followed a symlink out of the volume";
}

}  // namespace
}  // namespace nodevol::testing
