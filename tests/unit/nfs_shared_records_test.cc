// Shared records (backend/nfs/shared_records.h) on a local directory
// standing in for the mounted export: written atomically, read back,
// removed; and what a server (or a writer of the export) could put there
// instead — a symlink, a directory, a FIFO, a huge file — refused rather
// than followed, waited on or read whole.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sys/sysmacros.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>
#include <fstream>
#include <vector>

#include "backend/nfs/shared_records.h"
#include "../common/fifo_witness.h"

namespace nodevol {
namespace {

namespace fs = std::filesystem;

class SharedRecords : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nfs-shared-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    char out[] = "/tmp/nfs-outside-XXXXXX";
    ASSERT_NE(::mkdtemp(out), nullptr);
    outside_ = out;
  }
  void TearDown() override {
    fs::remove_all(root_);
    fs::remove_all(outside_);
  }
  std::string Dir() const { return root_ + "/.nodevol/volumes"; }

  std::string root_, outside_;
};

TEST_F(SharedRecords, PutReadRemove) {
  ASSERT_TRUE(PutSharedRecord(root_, "pvc-1", "{\"a\":1}\n").ok());
  EXPECT_EQ(fs::status(root_ + "/.nodevol").permissions(), fs::perms::owner_all);
  std::string text;
  ASSERT_TRUE(ReadSharedRecord(root_, "pvc-1", &text).ok());
  EXPECT_EQ(text, "{\"a\":1}\n");

  // Rewritten whole, and no temp file stays behind.
  ASSERT_TRUE(PutSharedRecord(root_, "pvc-1", "{\"a\":2}\n").ok());
  ASSERT_TRUE(ReadSharedRecord(root_, "pvc-1", &text).ok());
  EXPECT_EQ(text, "{\"a\":2}\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(Dir()), fs::directory_iterator()), 1);

  ASSERT_TRUE(RemoveSharedRecord(root_, "pvc-1").ok());
  EXPECT_EQ(ReadSharedRecord(root_, "pvc-1", &text).code(), Status::Code::kNotFound);
  EXPECT_TRUE(RemoveSharedRecord(root_, "pvc-1").ok()) << "removing a missing record is done";
}

// The temps in the records directory (names starting with ".").
std::vector<std::string> TempsIn(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string()[0] == '.') out.push_back(e.path().filename().string());
  return out;
}

void Age(const std::string& path, time_t seconds) {
  struct timespec t[2] = {{::time(nullptr) - seconds, 0}, {::time(nullptr) - seconds, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), t, 0), 0) << path;
}

// A writer killed between creating its temp and renaming it leaves the
// temp; it must not block the record nor outlive the volume. A fresh
// temp is another writer's in progress: not touched, and no reason to
// refuse this write (each writer has its own temp).
TEST_F(SharedRecords, ALeftoverTempIsClearedOnceStaleAndGoesWithTheRecord) {
  ASSERT_TRUE(PutSharedRecord(root_, "pvc-1", "{\"a\":1}\n").ok());
  EXPECT_TRUE(TempsIn(Dir()).empty()) << "a write left its temp";
  const std::string old_style = Dir() + "/.pvc-1.json.tmp", other = Dir() + "/.pvc-1.json.0123456789abcdef.tmp";
  const std::string not_ours = Dir() + "/.pvc-1.json.other.json.0123456789abcdef.tmp";  // no temp of pvc-1
  for (const std::string& t : {old_style, other, not_ours}) std::ofstream(t) << "half";
  ASSERT_TRUE(PutSharedRecord(root_, "pvc-1", "{\"a\":2}\n").ok());
  std::string text;
  ASSERT_TRUE(ReadSharedRecord(root_, "pvc-1", &text).ok());
  EXPECT_EQ(text, "{\"a\":2}\n");
  EXPECT_EQ(TempsIn(Dir()).size(), 3u) << "a fresh temp (another writer's) was removed";

  Age(old_style, 120);
  Age(other, 120);
  Age(not_ours, 120);
  ASSERT_TRUE(PutSharedRecord(root_, "pvc-1", "{\"a\":3}\n").ok());
  ASSERT_TRUE(ReadSharedRecord(root_, "pvc-1", &text).ok());
  EXPECT_EQ(text, "{\"a\":3}\n");
  EXPECT_FALSE(fs::exists(old_style));
  EXPECT_FALSE(fs::exists(other));
  EXPECT_TRUE(fs::exists(not_ours)) << "another volume's name was taken for a temp of pvc-1";
  fs::remove(not_ours);

  // The volume's removal takes every temp of it, fresh ones too.
  for (const std::string& t : {old_style, other}) std::ofstream(t) << "half";
  ASSERT_TRUE(RemoveSharedRecord(root_, "pvc-1").ok());
  EXPECT_TRUE(fs::is_empty(Dir())) << "the volume's temp outlived its record";
}

// issue 69 item 9: writers shared one temp name, so a second writer
// could remove the first's temp, write its own, and the first's rename
// then made the second's half-written temp the record. Many writers at
// once now each rename a whole record of their own.
TEST_F(SharedRecords, WritersAtOnceEachLeaveAWholeRecord) {
  ASSERT_TRUE(PutSharedRecord(root_, "pvc-3", "{}\n").ok());
  const std::string big(32 * 1024, 'x');
  std::vector<std::thread> writers;
  std::atomic<int> failed{0};
  for (int w = 0; w < 8; ++w)
    writers.emplace_back([&, w] {
      for (int i = 0; i < 50; ++i)
        if (!PutSharedRecord(root_, "pvc-3", std::to_string(w) + big + "\n").ok()) ++failed;
    });
  for (auto& t : writers) t.join();
  EXPECT_EQ(failed.load(), 0);
  std::string text;
  ASSERT_TRUE(ReadSharedRecord(root_, "pvc-3", &text).ok());
  EXPECT_EQ(text.size(), 1 + big.size() + 1);
  EXPECT_EQ(text.substr(1), big + "\n");
  EXPECT_TRUE(TempsIn(Dir()).empty()) << "writers left temps";
}

TEST_F(SharedRecords, NothingThereIsNotFound) {
  std::string text;
  EXPECT_EQ(ReadSharedRecord(root_, "pvc-1", &text).code(), Status::Code::kNotFound);
  EXPECT_TRUE(RemoveSharedRecord(root_, "pvc-1").ok());
  EXPECT_FALSE(fs::exists(root_ + "/.nodevol")) << "reading or removing makes nothing";
}

// .nodevol swapped for a symlink to a directory of the node's own: never
// followed, for writing or for reading.
TEST_F(SharedRecords, SymlinksAreNotFollowed) {
  ASSERT_EQ(::symlink(outside_.c_str(), (root_ + "/.nodevol").c_str()), 0);
  fs::create_directories(outside_ + "/volumes");
  std::ofstream(outside_ + "/volumes/pvc-1.json") << "{}";
  std::string text;
  Status st = ReadSharedRecord(root_, "pvc-1", &text);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.ToString();
  st = PutSharedRecord(root_, "pvc-2", "{}");
  EXPECT_FALSE(st.ok());
  EXPECT_FALSE(fs::exists(outside_ + "/volumes/pvc-2.json"));

  // The record itself a symlink.
  fs::remove(root_ + "/.nodevol");
  ASSERT_TRUE(PutSharedRecord(root_, "pvc-3", "{}").ok());
  fs::remove(Dir() + "/pvc-3.json");
  fs::create_symlink(outside_ + "/volumes/pvc-1.json", Dir() + "/pvc-3.json");
  st = ReadSharedRecord(root_, "pvc-3", &text);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.ToString();
}

TEST_F(SharedRecords, OnlyASmallRegularFileIsRead) {
  ASSERT_TRUE(PutSharedRecord(root_, "x", "{}").ok());
  fs::create_directory(Dir() + "/dir.json");
  std::string text;
  EXPECT_EQ(ReadSharedRecord(root_, "dir", &text).code(), Status::Code::kFailedPrecondition);

  // A FIFO would block a reader forever.
  ASSERT_EQ(::mkfifo((Dir() + "/fifo.json").c_str(), 0600), 0);
  EXPECT_EQ(ReadSharedRecord(root_, "fifo", &text).code(), Status::Code::kFailedPrecondition);

  std::ofstream(Dir() + "/big.json") << std::string(kMaxSharedRecordBytes + 1, 'x');
  Status st = ReadSharedRecord(root_, "big", &text);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.ToString();
}

// The export's owner picks what is at a record's name, and any pod author
// can make nodevold read a record by naming a volume in inline options: a
// device node or FIFO there was opened as root before its type was checked
// (issue 69, item 2). Now nothing but a regular file is ever opened.
TEST_F(SharedRecords, ADeviceOrFifoAtARecordsNameIsNeverOpened) {
  ASSERT_TRUE(PutSharedRecord(root_, "x", "{}").ok());
  testing::FifoWitness fifo(Dir() + "/fifo.json", outside_ + "/fifo-link");
  ASSERT_TRUE(fifo.ok()) << strerror(errno);
  std::string text;
  for (int i = 0; i < 20; ++i) {
    Status st = ReadSharedRecord(root_, "fifo", &text);
    EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.ToString();
    EXPECT_NE(st.message().find("is a FIFO"), std::string::npos) << st.message();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  fifo.Stop();
  EXPECT_EQ(fifo.opens(), 0) << "the FIFO was opened for reading";

  if (geteuid() != 0) GTEST_SKIP() << "mknod needs root";
  // /dev/null's numbers: a character device at the name.
  ASSERT_EQ(::mknod((Dir() + "/dev.json").c_str(), S_IFCHR | 0600, makedev(1, 3)), 0) << strerror(errno);
  Status st = ReadSharedRecord(root_, "dev", &text);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("is a character device"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace nodevol
