// Injected faults of the state directory: its filesystem full (ENOSPC) or
// read-only (EROFS) while kubelet and the provisioner keep calling. The
// state directory is a real tmpfs of 256 KiB mounted over the sandbox's,
// filled with a file or remounted read-only under the running nodevold.
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

#include "daemon_fixture.h"

namespace nodevol::testing {
namespace {

namespace fs = std::filesystem;

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

class StateFaultsTest : public DaemonFixture {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    fs::create_directories(state_dir_);
    ASSERT_EQ(::mount("nodevol-state", state_dir_.c_str(), "tmpfs", 0, "size=256k,mode=0700"), 0)
        << std::strerror(errno);
    mounted_ = true;
    StartDaemon();
  }
  void TearDown() override {
    if (DaemonRunning()) StopDaemon();
    if (mounted_) ::umount2(state_dir_.c_str(), MNT_DETACH);
    DaemonFixture::TearDown();
  }

  // Fills the state filesystem to the last block.
  void Fill() {
    {
      std::ofstream filler(state_dir_ + "/filler");
      std::string block(4096, 'x');
      while (filler.write(block.data(), block.size()) && filler.flush()) {
      }
    }
    ASSERT_EQ(WriteErrno(), ENOSPC) << "the state filesystem is not full";
  }
  void Unfill() { fs::remove(state_dir_ + "/filler"); }

  void ReadOnly(bool ro) {
    unsigned long flags = MS_REMOUNT | (ro ? MS_RDONLY : 0);
    ASSERT_EQ(::mount("nodevol-state", state_dir_.c_str(), "tmpfs", flags, "size=256k,mode=0700"), 0)
        << std::strerror(errno);
    ASSERT_EQ(WriteErrno(), ro ? EROFS : 0);
  }

  // errno of writing one byte to a new file of the state directory.
  int WriteErrno() {
    std::string probe = state_dir_ + "/probe";
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

  bool mounted_ = false;
};

TEST_F(StateFaultsTest, CreateOnAFullStateFilesystemFailsMakesNothingAndWorksOnceFreed) {
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

TEST_F(StateFaultsTest, PublishOnAFullStateFilesystemMountsNothingAndWorksOnceFreed) {
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

TEST_F(StateFaultsTest, ReadOnlyStateRefusesEveryChangeAndLeavesEverythingAsItWas) {
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
