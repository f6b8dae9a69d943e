#include "backend/dir/dir_backend.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "backend/registry.h"

namespace nodevol {
namespace {

namespace fs = std::filesystem;

class DirBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nodevol-dir-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    pool_ = tmpl;
    ASSERT_TRUE(MakeBackend("default", "dir", {{"path", pool_}, {"quota", "off"}}, &b_).ok());
  }
  void TearDown() override { fs::remove_all(pool_); }

  VolumeRecord Rec(const std::string& name, Params params = {}) {
    VolumeRecord r;
    r.spec = {name, "default", 1 << 20, "", params};
    return r;
  }

  std::string pool_;
  std::unique_ptr<Backend> b_;
};

TEST_F(DirBackendTest, CreateIsIdempotentAndKeepsData) {
  VolumeRecord r = Rec("v1", {{"mode", "0750"}, {"uid", "1000"}, {"gid", "2000"}});
  ASSERT_TRUE(b_->Create(&r).ok());
  EXPECT_EQ(r.attributes.at("path"), pool_ + "/v1");
  std::ofstream(pool_ + "/v1/data") << "keep me";
  ASSERT_TRUE(b_->Create(&r).ok());
  EXPECT_TRUE(fs::exists(pool_ + "/v1/data")) << "a second Create must not wipe data";
  struct stat st;
  ASSERT_EQ(stat((pool_ + "/v1").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
  EXPECT_EQ(st.st_uid, 1000u);
  EXPECT_EQ(st.st_gid, 2000u);
  std::string path;
  ASSERT_TRUE(b_->Stage(r, &path).ok());
  EXPECT_EQ(path, pool_ + "/v1");
}

TEST_F(DirBackendTest, DeleteRefusesAMountInsideAndKeepsItsData) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to mount";
  VolumeRecord r = Rec("v1");
  ASSERT_TRUE(b_->Create(&r).ok());
  fs::create_directories(pool_ + "/v1/sub");
  ASSERT_EQ(::mount("tmpfs", (pool_ + "/v1/sub").c_str(), "tmpfs", 0, "size=1m"), 0);
  std::ofstream(pool_ + "/v1/sub/precious") << "x";
  Status st = b_->Delete(r);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.message();
  EXPECT_NE(st.message().find("mount point"), std::string::npos) << st.message();
  EXPECT_TRUE(fs::exists(pool_ + "/v1/sub/precious")) << "delete reached into a mount";
  ASSERT_EQ(::umount2((pool_ + "/v1/sub").c_str(), 0), 0);
  EXPECT_TRUE(b_->Delete(r).ok());  // the interrupted delete finishes
  EXPECT_FALSE(fs::exists(pool_ + "/v1"));
  EXPECT_TRUE(fs::is_empty(pool_)) << "left the .deleting- tree";
}

TEST_F(DirBackendTest, DefaultModeLetsAnyPodUidWrite) {
  VolumeRecord r = Rec("v1");
  ASSERT_TRUE(b_->Create(&r).ok());
  struct stat st;
  ASSERT_EQ(stat((pool_ + "/v1").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0777u);
}

TEST_F(DirBackendTest, DeleteRemovesTheTreeWithoutFollowingSymlinks) {
  fs::create_directories(pool_ + "/../nodevol-dir-victim");
  std::string victim = fs::canonical(pool_ + "/../nodevol-dir-victim").string();
  std::ofstream(victim + "/precious") << "x";
  VolumeRecord r = Rec("v1");
  ASSERT_TRUE(b_->Create(&r).ok());
  fs::create_directories(pool_ + "/v1/a/b");
  std::ofstream(pool_ + "/v1/a/b/f") << "x";
  fs::create_directory_symlink(victim, pool_ + "/v1/link");
  ASSERT_TRUE(b_->Delete(r).ok());
  EXPECT_FALSE(fs::exists(pool_ + "/v1"));
  EXPECT_FALSE(fs::exists(pool_ + "/.deleting-v1"));
  EXPECT_TRUE(fs::exists(victim + "/precious")) << "delete followed a symlink";
  ASSERT_TRUE(b_->Delete(r).ok()) << "idempotent";
  fs::remove_all(victim);
}

TEST_F(DirBackendTest, InterruptedDeleteIsFinished) {
  VolumeRecord r = Rec("v1");
  ASSERT_TRUE(b_->Create(&r).ok());
  fs::rename(pool_ + "/v1", pool_ + "/.deleting-v1");  // as a crash after the rename leaves it
  ASSERT_TRUE(b_->Delete(r).ok());
  EXPECT_FALSE(fs::exists(pool_ + "/.deleting-v1"));
}

TEST_F(DirBackendTest, CheckReportsMissingData) {
  VolumeRecord r = Rec("v1");
  ASSERT_TRUE(b_->Create(&r).ok());
  EXPECT_TRUE(b_->Check(r).ok());
  fs::remove_all(pool_ + "/v1");
  EXPECT_EQ(b_->Check(r).code(), Status::Code::kNotFound);
}

TEST_F(DirBackendTest, ValidatesParameters) {
  EXPECT_TRUE(b_->Validate({"v", "default", 1, "", {{"mode", "2775"}}}).ok());
  for (Params bad : std::vector<Params>{{{"mode", "999"}}, {{"mode", "rwx"}}, {{"uid", "-1"}}, {{"gid", "x"}},
                                        {{"colour", "blue"}}}) {
    Status st = b_->Validate({"v", "default", 1, "", bad});
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << bad.begin()->first;
    EXPECT_NE(st.message().find(bad.begin()->first), std::string::npos) << st.message();
  }
  EXPECT_EQ(b_->Validate({"v", "default", 1, "ext4", {}}).code(), Status::Code::kInvalidArgument);
}

TEST_F(DirBackendTest, CapacityComesFromTheFilesystem) {
  Capacity c;
  ASSERT_TRUE(b_->GetCapacity(&c).ok());
  EXPECT_GT(c.total_bytes, 0u);
  EXPECT_LE(c.free_bytes, c.total_bytes);
}

TEST(DirBackendMake, RejectsBadPools) {
  std::unique_ptr<Backend> b;
  EXPECT_EQ(MakeBackend("p", "dir", {}, &b).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(MakeBackend("p", "dir", {{"path", "/nonexistent/pool"}}, &b).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(MakeBackend("p", "dir", {{"path", "/tmp"}, {"quota", "maybe"}}, &b).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(MakeBackend("p", "dir", {{"path", "/tmp"}, {"size", "1"}}, &b).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(MakeBackend("p", "zfs", {}, &b).code(), Status::Code::kInvalidArgument);
}

TEST(DirBackendMake, QuotaRequiredFailsWhereTheFilesystemHasNone) {
  // The test machines' /tmp has no project quota; "auto" falls back, "required" refuses.
  std::unique_ptr<Backend> b;
  ASSERT_TRUE(MakeBackend("p", "dir", {{"path", "/tmp"}, {"quota", "auto"}}, &b).ok());
  if (b->size_enforced()) GTEST_SKIP() << "/tmp has project quotas here";
  Status st = MakeBackend("p", "dir", {{"path", "/tmp"}, {"quota", "required"}}, &b);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("prjquota"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace nodevol
