// Directory work below an export (backend/nfs/export_dirs.h), on a local
// directory standing in for the mounted export: creation with modes,
// removal that never follows a symlink and can stop and go on, archive
// names, and symlinks on the "server" refused instead of followed.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "backend/nfs/export_dirs.h"

namespace nodevol {
namespace {

using Clock = std::chrono::steady_clock;

class ExportDirs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nfs-export-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    char out[] = "/tmp/nfs-outside-XXXXXX";
    ASSERT_NE(::mkdtemp(out), nullptr);
    outside_ = out;
  }
  void TearDown() override { std::system(("rm -rf " + root_ + " " + outside_).c_str()); }
  bool IsDir(const std::string& rel) {
    struct stat st;
    return ::lstat((root_ + "/" + rel).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  }
  bool Exists(const std::string& path) {
    struct stat st;
    return ::lstat(path.c_str(), &st) == 0;
  }
  mode_t Mode(const std::string& rel) {
    struct stat st;
    ::lstat((root_ + "/" + rel).c_str(), &st);
    return st.st_mode & 07777;
  }
  void Touch(const std::string& path) { std::ofstream(path) << "x"; }
  std::string root_, outside_;
};

TEST_F(ExportDirs, MakeNestedWithModes) {
  VolumeRoot vr;
  vr.mode = 0750;
  ASSERT_TRUE(MakeVolumeDir(root_, "ns/claim/data", vr, false).ok());
  EXPECT_TRUE(IsDir("ns/claim/data"));
  EXPECT_EQ(Mode("ns/claim/data"), 0750u);
  EXPECT_EQ(Mode("ns"), 0755u & ~0u) << std::oct << Mode("ns");
  // Again: reused, mode applied again.
  ::chmod((root_ + "/ns/claim/data").c_str(), 0700);
  ASSERT_TRUE(MakeVolumeDir(root_, "ns/claim/data", vr, false).ok());
  EXPECT_EQ(Mode("ns/claim/data"), 0750u);
  // chown only when asked.
  vr.uid = 4242;
  vr.gid = 4343;
  ASSERT_TRUE(MakeVolumeDir(root_, "owned", vr, true).ok());
  struct stat st;
  ASSERT_EQ(::stat((root_ + "/owned").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 4242u);
  EXPECT_EQ(st.st_gid, 4343u);
}

TEST_F(ExportDirs, SymlinksOnTheServerAreNotFollowed) {
  ASSERT_EQ(::symlink(outside_.c_str(), (root_ + "/out").c_str()), 0);
  VolumeRoot vr;
  Status st = MakeVolumeDir(root_, "out/escaped", vr, false);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.ToString();
  EXPECT_FALSE(Exists(outside_ + "/escaped"));
  // As the last segment too.
  st = MakeVolumeDir(root_, "out", vr, false);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.ToString();
  UniqueFd fd;
  EXPECT_EQ(OpenBelow(root_, "out", &fd).code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(OpenBelow(root_, "missing", &fd).code(), Status::Code::kNotFound);
  // A file in the way.
  Touch(root_ + "/file");
  EXPECT_EQ(MakeVolumeDir(root_, "file/x", vr, false).code(), Status::Code::kFailedPrecondition);
}

TEST_F(ExportDirs, RemoveNeverFollowsSymlinks) {
  VolumeRoot vr;
  ASSERT_TRUE(MakeVolumeDir(root_, "vol", vr, false).ok());
  ASSERT_EQ(::mkdir((root_ + "/vol/deep").c_str(), 0755), 0);
  Touch(root_ + "/vol/deep/file");
  Touch(outside_ + "/precious");
  ASSERT_EQ(::symlink(outside_.c_str(), (root_ + "/vol/deep/link-to-outside").c_str()), 0);
  ASSERT_EQ(::symlink((outside_ + "/precious").c_str(), (root_ + "/vol/file-link").c_str()), 0);
  bool done = false;
  ASSERT_TRUE(RemoveVolumeDir(root_, "vol", Clock::now() + std::chrono::seconds(10), &done).ok());
  EXPECT_TRUE(done);
  EXPECT_FALSE(Exists(root_ + "/vol"));
  EXPECT_TRUE(Exists(outside_ + "/precious"));
  // Missing is done; a missing parent too.
  ASSERT_TRUE(RemoveVolumeDir(root_, "vol", Clock::now() + std::chrono::seconds(1), &done).ok());
  EXPECT_TRUE(done);
  ASSERT_TRUE(RemoveVolumeDir(root_, "no/such", Clock::now() + std::chrono::seconds(1), &done).ok());
  EXPECT_TRUE(done);
  // Only the leaf of a nested path goes.
  ASSERT_TRUE(MakeVolumeDir(root_, "ns/v", vr, false).ok());
  ASSERT_TRUE(RemoveVolumeDir(root_, "ns/v", Clock::now() + std::chrono::seconds(1), &done).ok());
  EXPECT_TRUE(IsDir("ns"));
  EXPECT_FALSE(Exists(root_ + "/ns/v"));
}

TEST_F(ExportDirs, RemoveStopsAtTheDeadlineAndGoesOn) {
  VolumeRoot vr;
  ASSERT_TRUE(MakeVolumeDir(root_, "big", vr, false).ok());
  for (int i = 0; i < 200; ++i) Touch(root_ + "/big/f" + std::to_string(i));
  bool done = true;
  // A deadline already past: stops before removing everything.
  ASSERT_TRUE(RemoveVolumeDir(root_, "big", Clock::now() - std::chrono::seconds(1), &done).ok());
  EXPECT_FALSE(done);
  EXPECT_TRUE(IsDir("big"));
  int rounds = 0;
  while (!done && rounds++ < 1000)
    ASSERT_TRUE(RemoveVolumeDir(root_, "big", Clock::now() + std::chrono::milliseconds(1), &done).ok());
  EXPECT_TRUE(done);
  EXPECT_FALSE(Exists(root_ + "/big"));
}

TEST_F(ExportDirs, ArchiveNames) {
  VolumeRoot vr;
  std::string as;
  ASSERT_TRUE(MakeVolumeDir(root_, "ns/claim", vr, false).ok());
  ASSERT_TRUE(ArchiveVolumeDir(root_, "ns/claim", &as).ok());
  EXPECT_EQ(as, "ns/archived-claim");
  EXPECT_TRUE(IsDir("ns/archived-claim"));
  EXPECT_FALSE(Exists(root_ + "/ns/claim"));
  // Again: already archived, nothing to do.
  ASSERT_TRUE(ArchiveVolumeDir(root_, "ns/claim", &as).ok());
  EXPECT_EQ(as, "");
  // The name is taken: a UTC time stamp, then a counter.
  ASSERT_TRUE(MakeVolumeDir(root_, "ns/claim", vr, false).ok());
  ASSERT_TRUE(ArchiveVolumeDir(root_, "ns/claim", &as).ok());
  ASSERT_EQ(as.rfind("ns/archived-claim-", 0), 0u) << as;
  std::string stamp = as.substr(std::string("ns/archived-claim-").size());
  EXPECT_EQ(stamp.size(), 16u) << stamp;  // 20261121T134514Z
  EXPECT_EQ(stamp.back(), 'Z');
  ASSERT_TRUE(MakeVolumeDir(root_, "ns/claim", vr, false).ok());
  std::string second;
  ASSERT_TRUE(ArchiveVolumeDir(root_, "ns/claim", &second).ok());
  EXPECT_NE(second, as);
  EXPECT_TRUE(IsDir(second));
  // A long name keeps within 255 bytes.
  std::string longname(250, 'a');
  ASSERT_TRUE(MakeVolumeDir(root_, longname, vr, false).ok());
  ASSERT_TRUE(ArchiveVolumeDir(root_, longname, &as).ok());
  EXPECT_LE(as.size(), 255u);
  EXPECT_TRUE(IsDir(as));
  // An existing empty directory of the archive name is never replaced.
  ASSERT_TRUE(MakeVolumeDir(root_, "x", vr, false).ok());
  Touch(root_ + "/x/data");
  ASSERT_EQ(::mkdir((root_ + "/archived-x").c_str(), 0755), 0);
  ASSERT_TRUE(ArchiveVolumeDir(root_, "x", &as).ok());
  EXPECT_NE(as, "archived-x");
  EXPECT_TRUE(Exists(root_ + "/" + as + "/data"));
}

TEST_F(ExportDirs, StatFresh) {
  EXPECT_TRUE(StatFresh(root_).ok());
  EXPECT_FALSE(StatFresh(root_ + "/missing").ok());
  Touch(root_ + "/f");
  EXPECT_EQ(StatFresh(root_ + "/f").code(), Status::Code::kFailedPrecondition);
}

}  // namespace
}  // namespace nodevol
