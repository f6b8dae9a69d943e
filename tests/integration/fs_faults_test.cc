// Injected faults of the filesystems nodevold writes: the state
// directory's full (ENOSPC) or read-only (EROFS), and a dir pool's full,
// while kubelet and the provisioner keep calling. Each is a real tmpfs
// mounted over the sandbox's directory, filled with a file or remounted
// read-only under the running nodevold.
//
// What must hold for each call: a failure the caller can act on (a status
// naming the state directory and the kernel's reason), nothing half done
// (no volume directory without its record, no mount without its
// publication record), and the same call succeeding once the fault
// clears. Teardown on a full filesystem, which must succeed, is
// ReconcileTest.TeardownWorksOnAFullStateFilesystem.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "daemon_fixture.h"

namespace nodevol::testing {
namespace {

namespace fs = std::filesystem;

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

class FsFaultsTest : public DaemonFixture {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // The pool has room for a few 1 MiB volumes (a dir pool refuses a
    // size above its free space).
    for (auto [dir, size] : {std::pair{&state_dir_, "256k"}, std::pair{&pool_dir_, "4m"}}) {
      fs::create_directories(*dir);
      std::string options = std::string("size=") + size + ",nr_inodes=200,mode=0700";
      ASSERT_EQ(::mount("nodevol-test", dir->c_str(), "tmpfs", 0, options.c_str()), 0) << std::strerror(errno);
      mounted_.push_back(*dir);
    }
    StartDaemon();
  }
  void TearDown() override {
    if (DaemonRunning()) StopDaemon();
    for (const std::string& dir : mounted_) ::umount2(dir.c_str(), MNT_DETACH);
    DaemonFixture::TearDown();
  }

  // Fills dir's filesystem (the state directory's by default) to the
  // last block.
  void Fill(const std::string& dir = "") {
    std::string d = dir.empty() ? state_dir_ : dir;
    {
      std::ofstream filler(d + "/filler");
      std::string block(4096, 'x');
      while (filler.write(block.data(), block.size()) && filler.flush()) {
      }
    }
    ASSERT_EQ(WriteErrno(d), ENOSPC) << d << " is not full";
  }
  void Unfill(const std::string& dir = "") { fs::remove((dir.empty() ? state_dir_ : dir) + "/filler"); }

  void ReadOnly(bool ro) {
    unsigned long flags = MS_REMOUNT | (ro ? MS_RDONLY : 0);
    ASSERT_EQ(::mount("nodevol-state", state_dir_.c_str(), "tmpfs", flags, "size=256k,mode=0700"), 0)
        << std::strerror(errno);
    ASSERT_EQ(WriteErrno(state_dir_), ro ? EROFS : 0);
  }

  // errno of writing one byte to a new file of dir.
  int WriteErrno(const std::string& dir) {
    std::string probe = dir + "/probe";
    int fd = ::open(probe.c_str(), O_CREAT | O_WRONLY, 0600);
    if (fd < 0) return errno;
    char c = 'x';
    int err = ::write(fd, &c, 1) == 1 ? 0 : errno;
    ::close(fd);
    ::unlink(probe.c_str());
    return err;
  }

  // The volume's status is an error that says where and why.
  void ExpectStateError(const grpc::Status& st, const std::string& reason) {
    std::printf("  status %d: %s\n", static_cast<int>(st.error_code()), st.error_message().c_str());
    // UNAVAILABLE: kubelet and the provisioner retry it, and the
    // provisioner does not take it as a full pool.
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_TRUE(Contains(st.error_message(), state_dir_)) << st.error_message();
    EXPECT_TRUE(Contains(st.error_message(), reason)) << st.error_message();
    EXPECT_TRUE(Contains(st.error_message(), reason == "No space left on device" ? "is full" : "is read-only"))
        << st.error_message();
  }

  std::vector<std::string> VolumeNames() {
    std::vector<std::string> names;
    for (const auto& v : ListVolumes()) names.push_back(v.name());
    return names;
  }

  std::vector<std::string> mounted_;
};

TEST_F(FsFaultsTest, CreateOnAFullStateFilesystemFailsMakesNothingAndWorksOnceFreed) {
  ASSERT_TRUE(CreateVolume("before", 1 << 20).ok());
  Fill();
  ExpectStateError(CreateVolume("v1", 1 << 20), "No space left on device");
  EXPECT_EQ(VolumeNames(), std::vector<std::string>{"before"});
  EXPECT_FALSE(fs::exists(pool_dir_ + "/v1")) << "a volume directory without its record";
  // kubelet's and the provisioner's retries fail the same way, and alike.
  ExpectStateError(CreateVolume("v1", 1 << 20), "No space left on device");

  Unfill();
  grpc::Status st = CreateVolume("v1", 1 << 20);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(fs::is_directory(pool_dir_ + "/v1"));
  // And the record is there for the next start.
  ASSERT_EQ(StopDaemon(), 0);
  StartDaemon();
  EXPECT_EQ(VolumeNames(), (std::vector<std::string>{"before", "v1"}));
}

TEST_F(FsFaultsTest, PublishOnAFullStateFilesystemMountsNothingAndWorksOnceFreed) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data");
  Fill();
  ExpectStateError(Publish("v1", t), "No space left on device");
  EXPECT_FALSE(IsMountPoint(t)) << "a mount without its publication record";
  EXPECT_EQ(MountsBelow(pods_root_), 0);

  Unfill();
  grpc::Status st = Publish("v1", t);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(IsMountPoint(t));
  EXPECT_TRUE(Unpublish(t).ok());
}

TEST_F(FsFaultsTest, ReadOnlyStateRefusesEveryChangeAndLeavesEverythingAsItWas) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  ASSERT_TRUE(CreateVolume("v2", 1 << 20).ok());
  std::string a = MakeTarget("pod-1", "data"), b = MakeTarget("pod-2", "data");
  ASSERT_TRUE(Publish("v1", a).ok());
  {
    std::ofstream(a + "/file") << "kept";
  }
  ReadOnly(true);

  ExpectStateError(CreateVolume("v3", 1 << 20), "Read-only file system");
  EXPECT_FALSE(fs::exists(pool_dir_ + "/v3"));
  ExpectStateError(Publish("v2", b), "Read-only file system");
  EXPECT_FALSE(IsMountPoint(b));
  // Teardown cannot record its intent either: it is refused, and the
  // mount and the volume stay as their records say.
  ExpectStateError(Unpublish(a), "Read-only file system");
  EXPECT_TRUE(IsMountPoint(a));
  EXPECT_EQ(ReadAll(a + "/file"), "kept");
  ExpectStateError(DeleteVolume("v2"), "Read-only file system");
  EXPECT_TRUE(fs::is_directory(pool_dir_ + "/v2"));
  EXPECT_EQ(VolumeNames(), (std::vector<std::string>{"v1", "v2"}));

  ReadOnly(false);
  grpc::Status st = Unpublish(a);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_FALSE(IsMountPoint(a));
  st = DeleteVolume("v2");
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_FALSE(fs::exists(pool_dir_ + "/v2"));
  st = Publish("v1", b);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(ReadAll(b + "/file"), "kept");
  EXPECT_TRUE(Unpublish(b).ok());
  st = CreateVolume("v3", 1 << 20);
  EXPECT_TRUE(st.ok()) << st.error_message();

  // A restart agrees: v1 and v3, nothing published.
  ASSERT_EQ(StopDaemon(), 0);
  StartDaemon();
  EXPECT_EQ(VolumeNames(), (std::vector<std::string>{"v1", "v3"}));
  EXPECT_EQ(MountsBelow(pods_root_), 0);
}

}  // namespace
}  // namespace nodevol::testing

namespace nodevol::testing {
namespace {

// A dir pool whose filesystem is full: no room is no room, whatever the
// pool's figures said a moment before. Volumes already there keep working
// (a pod sees ENOSPC on its own writes) and can be deleted, which frees
// the room for the next create.
TEST_F(FsFaultsTest, ACreateInAFullDirPoolIsNoRoomAndDeleteStillFreesIt) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data");
  ASSERT_TRUE(Publish("v1", t).ok());
  Fill(pool_dir_);
  grpc::Status st = CreateVolume("v2", 1 << 20);
  std::printf("  status %d: %s\n", static_cast<int>(st.error_code()), st.error_message().c_str());
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_TRUE(Contains(st.error_message(), "default")) << "names the pool: " << st.error_message();
  EXPECT_EQ(VolumeNames(), std::vector<std::string>{"v1"});
  EXPECT_FALSE(fs::exists(pool_dir_ + "/v2"));
  EXPECT_EQ(WriteErrno(t), ENOSPC) << "the pod's own writes";

  EXPECT_TRUE(Unpublish(t).ok());
  st = DeleteVolume("v1");
  EXPECT_TRUE(st.ok()) << st.error_message();
  Unfill(pool_dir_);
  st = CreateVolume("v2", 1 << 20);
  EXPECT_TRUE(st.ok()) << st.error_message();
}

// The pool's filesystem out of inodes with bytes to spare: the figures
// say there is room, and only the mkdir finds out there is not.
TEST_F(FsFaultsTest, ACreateInADirPoolOutOfInodesFailsAndLeavesNoRecord) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  int files = 0;
  for (;; ++files) {
    int fd = ::open((pool_dir_ + "/inode-" + std::to_string(files)).c_str(), O_CREAT | O_WRONLY, 0600);
    if (fd < 0) {
      ASSERT_EQ(errno, ENOSPC) << std::strerror(errno);
      break;
    }
    ::close(fd);
    ASSERT_LT(files, 1000000) << "tmpfs never ran out of inodes";
  }
  grpc::Status st = CreateVolume("v2", 1 << 20);
  std::printf("  status %d: %s\n", static_cast<int>(st.error_code()), st.error_message().c_str());
  // Nothing was made: no room, which lets the provisioner try another node.
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_TRUE(Contains(st.error_message(), "pool default")) << st.error_message();
  EXPECT_TRUE(Contains(st.error_message(), "No space left on device")) << st.error_message();
  EXPECT_EQ(VolumeNames(), std::vector<std::string>{"v1"}) << "a record without its volume";
  EXPECT_FALSE(fs::exists(pool_dir_ + "/v2"));

  ::unlink((pool_dir_ + "/inode-0").c_str());
  ::unlink((pool_dir_ + "/inode-1").c_str());
  st = CreateVolume("v2", 1 << 20);
  EXPECT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(StopDaemon(), 0);
  StartDaemon();
  EXPECT_EQ(VolumeNames(), (std::vector<std::string>{"v1", "v2"}));
}

}  // namespace
}  // namespace nodevol::testing
