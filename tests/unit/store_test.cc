#include "state/store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "state/atomic_file.h"

namespace nodevol {
namespace {

namespace fs = std::filesystem;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nodevol-store-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  static VolumeRecord Volume(const std::string& name) {
    VolumeRecord v;
    v.spec = {name, "default", 1 << 20, "", {{"mode", "0750"}}};
    v.backend = "dir";
    v.state = VolumeState::kReady;
    v.created_unix = 1700000000;
    v.attributes = {{"path", "/srv/" + name}};
    return v;
  }

  std::string dir_;
};

TEST_F(StoreTest, RoundTripsRecords) {
  Store s(dir_);
  ASSERT_TRUE(s.Open().ok());
  ASSERT_TRUE(s.PutVolume(Volume("v1")).ok());
  PublicationRecord p;
  p.target = "/var/lib/kubelet/pods/u/volumes/nodevol.io~volume/data";
  p.volume = "v1";
  p.source = "/srv/v1";
  p.state = PublicationState::kPublished;
  p.read_only = true;
  p.mount_options = {"noexec"};
  p.fs_group = 2000;
  p.pod = {"u", "web-0", "default", "sa"};
  ASSERT_TRUE(s.PutPublication(p).ok());

  std::vector<VolumeRecord> vols;
  std::vector<PublicationRecord> pubs;
  std::vector<std::string> problems;
  ASSERT_TRUE(s.Load(&vols, &pubs, &problems).ok());
  ASSERT_EQ(vols.size(), 1u);
  EXPECT_EQ(vols[0].spec.name, "v1");
  EXPECT_EQ(vols[0].spec.parameters.at("mode"), "0750");
  EXPECT_EQ(vols[0].state, VolumeState::kReady);
  EXPECT_EQ(vols[0].attributes.at("path"), "/srv/v1");
  ASSERT_EQ(pubs.size(), 1u);
  EXPECT_EQ(pubs[0].target, p.target);
  EXPECT_EQ(pubs[0].fs_group, std::optional<uint32_t>(2000));
  EXPECT_TRUE(pubs[0].read_only);
  EXPECT_EQ(pubs[0].pod.name, "web-0");
  EXPECT_TRUE(problems.empty());

  ASSERT_TRUE(s.RemoveVolume("v1").ok());
  ASSERT_TRUE(s.RemovePublication(p.target).ok());
  ASSERT_TRUE(s.RemoveVolume("v1").ok()) << "removing twice is fine";
  vols.clear();
  pubs.clear();
  ASSERT_TRUE(s.Load(&vols, &pubs, &problems).ok());
  EXPECT_TRUE(vols.empty());
  EXPECT_TRUE(pubs.empty());
}

TEST_F(StoreTest, SecondOpenOfTheSameDirIsRefused) {
  Store a(dir_), b(dir_);
  ASSERT_TRUE(a.Open().ok());
  Status st = b.Open();
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("another nodevold"), std::string::npos);
}

TEST_F(StoreTest, LayoutIsPrivate) {
  Store s(dir_ + "/state");
  ASSERT_TRUE(s.Open().ok());
  ASSERT_TRUE(s.PutVolume(Volume("v1")).ok());
  struct stat st;
  ASSERT_EQ(stat((dir_ + "/state").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(stat((dir_ + "/state/volumes/v1.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(StoreTest, CorruptRecordIsMovedAsideAndReported) {
  {
    Store s(dir_);
    ASSERT_TRUE(s.Open().ok());
    ASSERT_TRUE(s.PutVolume(Volume("good")).ok());
  }
  std::ofstream(dir_ + "/volumes/bad.json") << "{\"format\": 1, \"name\": ";
  Store s(dir_);
  ASSERT_TRUE(s.Open().ok());
  std::vector<VolumeRecord> vols;
  std::vector<PublicationRecord> pubs;
  std::vector<std::string> problems;
  ASSERT_TRUE(s.Load(&vols, &pubs, &problems).ok());
  ASSERT_EQ(vols.size(), 1u);
  EXPECT_EQ(vols[0].spec.name, "good");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("bad.json"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir_ + "/volumes/bad.json.corrupt")) << "kept for the operator";
  EXPECT_FALSE(fs::exists(dir_ + "/volumes/bad.json"));
}

TEST_F(StoreTest, TempFilesFromACrashAreDroppedOnOpen) {
  fs::create_directories(dir_ + "/volumes");
  std::ofstream(dir_ + "/volumes/.tmp-v9.json") << "{half";
  Store s(dir_);
  ASSERT_TRUE(s.Open().ok());
  EXPECT_FALSE(fs::exists(dir_ + "/volumes/.tmp-v9.json"));
}

TEST(AtomicFile, ReplacesWholeFile) {
  char tmpl[] = "/tmp/nodevol-atomic-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string d = tmpl;
  ASSERT_TRUE(WriteFileAtomic(d, "f", "first version, long").ok());
  ASSERT_TRUE(WriteFileAtomic(d, "f", "second").ok());
  std::string got;
  ASSERT_TRUE(ReadWholeFile(d + "/f", &got).ok());
  EXPECT_EQ(got, "second");
  EXPECT_FALSE(fs::exists(d + "/.tmp-f"));
  fs::remove_all(d);
}

}  // namespace
}  // namespace nodevol
