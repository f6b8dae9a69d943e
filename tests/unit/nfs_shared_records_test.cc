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

#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>
#include <fstream>

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

// A writer killed between creating its temp and renaming it leaves the
// temp; it must not block the record forever nor outlive the volume. A
// fresh temp is another node's write in progress: not clobbered.
TEST_F(SharedRecords, ALeftoverTempIsReplacedOnceStaleAndGoesWithTheRecord) {
  ASSERT_TRUE(PutSharedRecord(root_, "pvc-1", "{\"a\":1}\n").ok());
  const std::string tmp = Dir() + "/.pvc-1.json.tmp";
  { std::ofstream(tmp) << "half"; }
  Status busy = PutSharedRecord(root_, "pvc-1", "{\"a\":2}\n");
  EXPECT_EQ(busy.code(), Status::Code::kUnavailable) << busy.ToString();
  std::string text;
  ASSERT_TRUE(ReadSharedRecord(root_, "pvc-1", &text).ok());
  EXPECT_EQ(text, "{\"a\":1}\n") << "a refused write changed the record";

  struct timespec old[2] = {{::time(nullptr) - 120, 0}, {::time(nullptr) - 120, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, tmp.c_str(), old, 0), 0);
  ASSERT_TRUE(PutSharedRecord(root_, "pvc-1", "{\"a\":3}\n").ok());
  ASSERT_TRUE(ReadSharedRecord(root_, "pvc-1", &text).ok());
  EXPECT_EQ(text, "{\"a\":3}\n");
  EXPECT_FALSE(fs::exists(tmp));

  { std::ofstream(tmp) << "half"; }
  ASSERT_TRUE(RemoveSharedRecord(root_, "pvc-1").ok());
  EXPECT_TRUE(fs::is_empty(Dir())) << "the volume's temp outlived its record";
}

// A create killed mid-write leaves its temp behind; the retried create
// (which no other node can be writing: the volume is unknown to them
// until its record is there) replaces it at once.
TEST_F(SharedRecords, ACreatesOwnFreshLeftoverIsReplaced) {
  ASSERT_TRUE(PutSharedRecord(root_, "pvc-2", "{\"a\":0}\n").ok());  // makes the directory
  ASSERT_TRUE(RemoveSharedRecord(root_, "pvc-2").ok());
  const std::string tmp = Dir() + "/.pvc-2.json.tmp";
  { std::ofstream(tmp) << "half"; }
  EXPECT_EQ(PutSharedRecord(root_, "pvc-2", "{\"a\":1}\n").code(), Status::Code::kUnavailable);
  ASSERT_TRUE(PutSharedRecord(root_, "pvc-2", "{\"a\":1}\n", /*creating=*/true).ok());
  std::string text;
  ASSERT_TRUE(ReadSharedRecord(root_, "pvc-2", &text).ok());
  EXPECT_EQ(text, "{\"a\":1}\n");
  EXPECT_FALSE(fs::exists(tmp));
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
