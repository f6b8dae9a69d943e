// Publications are nosuid,nodev (issue 25, item 7): a setuid-root binary
// and a device node a pod plants in a dir volume are inert through its
// publication; a pool with allow-suid-dev=yes publishes them live (the
// control that shows the check can fail); a bad value stops the start.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <sstream>

#include "daemon_fixture.h"
#include "mount/mount_table.h"

namespace nodevol::testing {
namespace {

namespace fs = std::filesystem;

bool HasOption(const std::string& path, const std::string& want) {
  MountTable table;
  const MountEntry* e = table.Load().ok() ? table.FindTarget(path) : nullptr;
  std::stringstream ss(e ? e->options : "");
  for (std::string o; std::getline(ss, o, ',');)
    if (o == want) return true;
  return false;
}

class PublicationFlagsTest : public DaemonFixture {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    open_pool_ = root_ + "/open-pool";
    fs::create_directories(open_pool_);
    // Nobody (the unprivileged user below) must reach the targets.
    ASSERT_EQ(::chmod(root_.c_str(), 0755), 0);
  }

  // Plants a setuid-root copy of id(1) and a /dev/null node in a new
  // volume of `pool`, publishes it and returns the target.
  std::string PlantAndPublish(const std::string& pool, const std::string& pod) {
    EXPECT_TRUE(CreateVolume("v-" + pod, 1 << 20, pool).ok());
    std::string data = GetVolume("v-" + pod).attributes().at("path");
    fs::copy_file("/usr/bin/id", data + "/id");
    EXPECT_EQ(::chown((data + "/id").c_str(), 0, 0), 0);
    EXPECT_EQ(::chmod((data + "/id").c_str(), 04755), 0);
    EXPECT_EQ(::mknod((data + "/null").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0) << strerror(errno);
    std::string t = MakeTarget(pod, "data");
    grpc::Status st = Publish("v-" + pod, t);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return t;
  }

  // The effective uid id(1) reports when nobody runs the planted copy.
  std::string EuidAsNobody(const std::string& target) {
    std::string out, err;
    int rc = RunCommand({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", target + "/id", "-u"}, &out, &err);
    EXPECT_EQ(rc, 0) << err;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  std::string open_pool_;
};

TEST_F(PublicationFlagsTest, SetuidFilesAndDeviceNodesAreInertThroughAPublication) {
  StartDaemon();
  std::string t = PlantAndPublish("default", "pod-1");
  EXPECT_TRUE(HasOption(t, "nosuid"));
  EXPECT_TRUE(HasOption(t, "nodev"));
  EXPECT_EQ(EuidAsNobody(t), "65534") << "the setuid bit took effect through the publication";
  int fd = ::open((t + "/null").c_str(), O_WRONLY | O_CLOEXEC);
  EXPECT_LT(fd, 0) << "the device node opened through the publication";
  EXPECT_EQ(errno, EACCES);
  if (fd >= 0) ::close(fd);
  // Reconcile (a restart) keeps them.
  StopDaemon();
  StartDaemon();
  EXPECT_TRUE(HasOption(t, "nosuid"));
  EXPECT_TRUE(HasOption(t, "nodev"));
}

TEST_F(PublicationFlagsTest, APoolWithAllowSuidDevPublishesThemLive) {
  StartDaemon({"--pool=name=open,backend=dir,path=" + open_pool_ + ",allow-suid-dev=yes"});
  std::string t = PlantAndPublish("open", "pod-2");
  EXPECT_FALSE(HasOption(t, "nosuid"));
  EXPECT_FALSE(HasOption(t, "nodev"));
  EXPECT_EQ(EuidAsNobody(t), "0");
  int fd = ::open((t + "/null").c_str(), O_WRONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << strerror(errno);
  if (fd >= 0) ::close(fd);
}

TEST_F(PublicationFlagsTest, ABadAllowSuidDevValueStopsTheStart) {
  std::vector<std::string> argv = {NODEVOLD_PATH};
  for (std::string& f : DaemonFlags()) argv.push_back(std::move(f));
  argv.push_back("--pool=name=open,backend=dir,path=" + open_pool_ + ",allow-suid-dev=maybe");
  std::string out, err;
  EXPECT_NE(RunCommand(argv, &out, &err), 0);
  EXPECT_NE(err.find("allow-suid-dev must be yes or no"), std::string::npos) << err;
}

}  // namespace
}  // namespace nodevol::testing
