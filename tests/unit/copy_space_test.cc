// What a dir pool's copy asks for before its first byte: MeasureTree
// (fs/tree_copy.h) counts what the copy will write, hard links in full;
// CopySpace (backend/dir/copy_space.h) promises it against the free space
// less the other copies' promises (issue 69 item 6).
#include "backend/dir/copy_space.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "fs/tree_copy.h"

namespace nodevol {
namespace {

constexpr uint64_t kCopyMiB = 1 << 20;

TreeSize Bytes(uint64_t bytes) { return TreeSize{bytes, 1}; }
const TreeSize kFree100MiB{100 * kCopyMiB, 1000};

TEST(CopySpace, TwoCopiesCannotBothTakeWhatThePoolHasOnce) {
  CopySpace space;
  CopySpace::Hold first;
  ASSERT_TRUE(space.Reserve(Bytes(60 * kCopyMiB), kFree100MiB, "/pool/a", "fast", &first).ok());
  EXPECT_EQ(space.promised(), 60 * kCopyMiB);
  {
    // The free space has not moved yet (the first copy has written
    // nothing): the second is refused all the same.
    CopySpace::Hold second;
    Status st = space.Reserve(Bytes(50 * kCopyMiB), kFree100MiB, "/pool/b", "fast", &second);
    EXPECT_EQ(st.code(), Status::Code::kResourceExhausted);
    EXPECT_NE(st.message().find("/pool/b"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("promised to copies under way"), std::string::npos) << st.message();
    EXPECT_EQ(space.promised(), 60 * kCopyMiB) << "a refusal promised something";
    ASSERT_TRUE(space.Reserve(Bytes(40 * kCopyMiB), kFree100MiB, "/pool/c", "fast", &second).ok()) << "exactly what is left";
    EXPECT_EQ(space.promised(), 100 * kCopyMiB);
  }
  EXPECT_EQ(space.promised(), 60 * kCopyMiB) << "a copy's end gives its promise back";
  first.Release();
  EXPECT_EQ(space.promised(), 0u);
  first.Release();  // twice: nothing more
  EXPECT_EQ(space.promised(), 0u);
  CopySpace::Hold big;
  EXPECT_EQ(space.Reserve(Bytes(101 * kCopyMiB), kFree100MiB, "/pool/d", "fast", &big).code(), Status::Code::kResourceExhausted);
}

TEST(CopySpace, InodesArePromisedLikeBytes) {
  // A tree of empty files takes no bytes but an inode each.
  CopySpace space;
  CopySpace::Hold first, second;
  ASSERT_TRUE(space.Reserve(TreeSize{0, 600}, kFree100MiB, "/pool/empty-files", "fast", &first).ok());
  Status st = space.Reserve(TreeSize{0, 500}, kFree100MiB, "/pool/more", "fast", &second);
  EXPECT_EQ(st.code(), Status::Code::kResourceExhausted);
  EXPECT_NE(st.message().find("inodes"), std::string::npos) << st.message();
  EXPECT_EQ(space.promised(), 0u) << "inodes are not bytes";
  first.Release();
  EXPECT_TRUE(space.Reserve(TreeSize{0, 500}, kFree100MiB, "/pool/more", "fast", &second).ok());
}

TEST(CopySpace, PoolsOnOneFilesystemShareOne) {
  // Two pools on one filesystem see the same free space: their copies
  // must be promised from one account (a review found one per pool).
  CopySpace& a = CopySpace::ForFilesystem(makedev(250, 1));
  CopySpace& b = CopySpace::ForFilesystem(makedev(250, 1));
  CopySpace& other = CopySpace::ForFilesystem(makedev(250, 2));
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &other);
  CopySpace::Hold first, second;
  ASSERT_TRUE(a.Reserve(Bytes(60 * kCopyMiB), kFree100MiB, "/pool-a/v", "a", &first).ok());
  EXPECT_EQ(b.Reserve(Bytes(60 * kCopyMiB), kFree100MiB, "/pool-b/v", "b", &second).code(),
            Status::Code::kResourceExhausted);
  EXPECT_TRUE(other.Reserve(Bytes(60 * kCopyMiB), kFree100MiB, "/pool-c/v", "c", &second).ok());
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
  TreeSize Measure() {
    int fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    TreeSize size;
    Status st = MeasureTree(fd, &size);
    EXPECT_TRUE(st.ok()) << st.ToString();
    ::close(fd);
    return size;
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
  // Each entry's cost in its directory of the copy: ext4's dirent, 8 bytes
  // and the name 4-aligned (a pod may rename entries after the measure).
  uint64_t names = 0;
  for (const char* n : {"sub", "data", "l1", "l2", "l3", "sparse"}) names += 8 + (std::strlen(n) + 3) / 4 * 4;
  const uint64_t want = 4 * data + Allocated("sparse") + dirs + names;
  const TreeSize got = Measure();
  EXPECT_EQ(got.entries, 6u) << "sub, four links, the sparse file";
  EXPECT_EQ(got.bytes, want) << "four links of " << data << " bytes, a sparse file of " << Allocated("sparse")
                             << " allocated, directories of " << dirs;
  EXPECT_LT(Allocated("sparse"), kCopyMiB) << "this filesystem filled the hole: the sparse case shows nothing";
}

TEST_F(MeasureTreeTest, EmptyFilesAreEntries) {
  for (int i = 0; i < 10; ++i) Write("empty" + std::to_string(i), 0);
  const TreeSize got = Measure();
  EXPECT_EQ(got.entries, 10u);
  EXPECT_EQ(got.bytes, Allocated(".") + 10 * (8 + 8)) << "empty files allocate nothing but their names";
}

}  // namespace
}  // namespace nodevol
