// The NFS backend's reading of the mount table (backend/nfs/mountinfo.h):
// devices, NFS sources and the optional fields of mountinfo lines.
#include <gtest/gtest.h>

#include <sys/sysmacros.h>
#include <unistd.h>

#include <fstream>

#include "backend/nfs/mountinfo.h"

namespace nodevol {
namespace {

TEST(NfsMountInfo, DevicesSourcesAndTypes) {
  char path[] = "/tmp/nfs-mountinfo-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path)
      << "22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:5 - proc proc rw\n"
         "43 29 0:36 / /var/lib/nodevol/nfs/2fd915f77024a003 rw,relatime shared:20 master:3 - nfs4 10.0.0.5:/ "
         "rw,vers=4.2,hard,timeo=77,addr=10.0.0.5\n"
         "44 29 0:36 / /var/lib/nodevol/nfs/volumes/v1 rw,relatime - nfs4 10.0.0.5:/team-data rw,vers=4.2\n"
         "45 29 0:36 / /var/lib/kubelet/pods/p/volumes/nodevol.io~volume/v1 ro,relatime - nfs4 10.0.0.5:/team-data "
         "rw,vers=4.2\n"
         "46 29 0:40 / /mnt/v3 rw - nfs [fd00::5]:/export rw,vers=3\n"
         "47 29 0:36 / /var/lib/nodevol/nfs/volumes/v1 rw,relatime - nfs4 10.0.0.5:/other rw\n";
  std::vector<MountInfo> m;
  ASSERT_TRUE(LoadMountInfo(&m, path).ok());
  ::unlink(path);
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[1].target, "/var/lib/nodevol/nfs/2fd915f77024a003");
  EXPECT_EQ(m[1].source, "10.0.0.5:/");
  EXPECT_EQ(m[1].fstype, "nfs4");
  EXPECT_EQ(m[1].dev, makedev(0, 36));
  EXPECT_NE(m[1].options.find("timeo=77"), std::string::npos) << m[1].options;
  EXPECT_EQ(m[2].dev, m[1].dev);
  EXPECT_EQ(m[3].options.rfind("ro", 0), 0u) << m[3].options;
  EXPECT_EQ(m[4].source, "[fd00::5]:/export");
  EXPECT_EQ(m[4].dev, makedev(0, 40));
  EXPECT_TRUE(IsNfsType(m[4].fstype));
  EXPECT_FALSE(IsNfsType(m[0].fstype));
  // The top-most mount at a path wins.
  const MountInfo* top = FindMount(m, "/var/lib/nodevol/nfs/volumes/v1");
  ASSERT_NE(top, nullptr);
  EXPECT_EQ(top->source, "10.0.0.5:/other");
  EXPECT_EQ(FindMount(m, "/var/lib/nodevol/nfs"), nullptr);
}

TEST(NfsMountInfo, ThisProcess) {
  std::vector<MountInfo> m;
  ASSERT_TRUE(LoadMountInfo(&m).ok());
  EXPECT_NE(FindMount(m, "/"), nullptr);
}

}  // namespace
}  // namespace nodevol
