// What a dir pool's copy asks for before its first byte: MeasureTree
// (fs/tree_copy.h) counts what the copy will write, hard links in full;
// CopySpace (backend/dir/copy_space.h) promises it against the free space
// less the other copies' promises (issue 69 item 6).
#include "backend/dir/copy_space.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "fs/tree_copy.h"

namespace nodevol {
namespace {

constexpr uint64_t kCopyMiB = 1 << 20;

TEST(CopySpace, TwoCopiesCannotBothTakeWhatThePoolHasOnce) {
  CopySpace space;
  CopySpace::Hold first;
  ASSERT_TRUE(space.Reserve(60 * kCopyMiB, 100 * kCopyMiB, "/pool/a", "fast", &first).ok());
  EXPECT_EQ(space.promised(), 60 * kCopyMiB);
  {
    // The free space has not moved yet (the first copy has written
    // nothing): the second is refused all the same.
    CopySpace::Hold second;
    Status st = space.Reserve(50 * kCopyMiB, 100 * kCopyMiB, "/pool/b", "fast", &second);
    EXPECT_EQ(st.code(), Status::Code::kResourceExhausted);
    EXPECT_NE(st.message().find("/pool/b"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("promised to copies under way"), std::string::npos) << st.message();
    EXPECT_EQ(space.promised(), 60 * kCopyMiB) << "a refusal promised something";
    ASSERT_TRUE(space.Reserve(40 * kCopyMiB, 100 * kCopyMiB, "/pool/c", "fast", &second).ok()) << "exactly what is left";
    EXPECT_EQ(space.promised(), 100 * kCopyMiB);
  }
  EXPECT_EQ(space.promised(), 60 * kCopyMiB) << "a copy's end gives its promise back";
  first.Release();
  EXPECT_EQ(space.promised(), 0u);
  first.Release();  // twice: nothing more
  EXPECT_EQ(space.promised(), 0u);
  CopySpace::Hold big;
  EXPECT_EQ(space.Reserve(101 * kCopyMiB, 100 * kCopyMiB, "/pool/d", "fast", &big).code(), Status::Code::kResourceExhausted);
}

class MeasureTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nodevol-measure-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, uint64_t bytes, off_t at = 0) {
    int fd = ::open((dir_ + "/" + name).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    std::string chunk(bytes, 'm');
    ASSERT_EQ(::pwrite(fd, chunk.data(), chunk.size(), at), static_cast<ssize_t>(bytes));
    ASSERT_EQ(::fsync(fd), 0);
    ::close(fd);
  }
  uint64_t Allocated(const std::string& name) {
    struct stat st;
    EXPECT_EQ(::lstat((dir_ + "/" + name).c_str(), &st), 0);
    return static_cast<uint64_t>(st.st_blocks) * 512;
  }
  uint64_t Measure() {
    int fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    uint64_t bytes = 0;
    Status st = MeasureTree(fd, &bytes);
    EXPECT_TRUE(st.ok()) << st.ToString();
    ::close(fd);
    return bytes;
  }
  std::string dir_;
};

TEST_F(MeasureTreeTest, EveryHardLinkInFullHolesNot) {
  std::filesystem::create_directory(dir_ + "/sub");
  Write("sub/data", 2 * kCopyMiB);
  for (const char* link : {"sub/l1", "l2", "l3"})
    ASSERT_EQ(::link((dir_ + "/sub/data").c_str(), (dir_ + "/" + link).c_str()), 0);
  // 8 MiB long, one 4 KiB block written at its end: a hole the copy keeps.
  Write("sparse", 4096, 8 * kCopyMiB - 4096);
  const uint64_t data = Allocated("sub/data");
  ASSERT_GE(data, 2 * kCopyMiB);
  const uint64_t dirs = Allocated(".") + Allocated("sub");
  const uint64_t want = 4 * data + Allocated("sparse") + dirs;
  EXPECT_EQ(Measure(), want) << "four links of " << data << " bytes, a sparse file of " << Allocated("sparse")
                             << " allocated, directories of " << dirs;
  EXPECT_LT(Allocated("sparse"), kCopyMiB) << "this filesystem filled the hole: the sparse case shows nothing";
}

}  // namespace
}  // namespace nodevol
