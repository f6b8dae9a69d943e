// Directory work below an export (backend/nfs/export_dirs.h), on a local
// directory standing in for the mounted export: creation with modes,
// removal that never follows a symlink and can stop and go on, archive
// names, and symlinks on the "server" refused instead of followed.
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
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
  void TearDown() override {
    std::filesystem::remove_all(root_);
    std::filesystem::remove_all(outside_);
  }
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
  size_t Count(const std::string& dir) {
    size_t n = 0;
    if (DIR* d = ::opendir(dir.c_str())) {
      while (struct dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
      ::closedir(d);
    }
    return n;
  }
  // One slice of a delete as the backend runs it, with a fresh cursor
  // (a new DeleteVolume) unless one is given.
  Status Remove(const std::string& rel, Clock::time_point until, bool* done, RemoveCursor* c = nullptr) {
    RemoveCursor fresh;
    return RemoveVolumeDir(root_, rel, ".nodevol-deleting-v", until, c ? c : &fresh, done);
  }
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
  ASSERT_TRUE(Remove("vol", Clock::now() + std::chrono::seconds(10), &done).ok());
  EXPECT_TRUE(done);
  EXPECT_FALSE(Exists(root_ + "/vol"));
  EXPECT_TRUE(Exists(outside_ + "/precious"));
  // Missing is done; a missing parent too.
  ASSERT_TRUE(Remove("vol", Clock::now() + std::chrono::seconds(1), &done).ok());
  EXPECT_TRUE(done);
  ASSERT_TRUE(Remove("no/such", Clock::now() + std::chrono::seconds(1), &done).ok());
  EXPECT_TRUE(done);
  // Only the leaf of a nested path goes.
  ASSERT_TRUE(MakeVolumeDir(root_, "ns/v", vr, false).ok());
  ASSERT_TRUE(Remove("ns/v", Clock::now() + std::chrono::seconds(1), &done).ok());
  EXPECT_TRUE(IsDir("ns"));
  EXPECT_FALSE(Exists(root_ + "/ns/v"));
}

TEST_F(ExportDirs, RemoveStopsAtTheDeadlineAndGoesOn) {
  VolumeRoot vr;
  ASSERT_TRUE(MakeVolumeDir(root_, "big", vr, false).ok());
  for (int i = 0; i < 200; ++i) Touch(root_ + "/big/f" + std::to_string(i));
  bool done = true;
  // A deadline already past: stops before removing everything (renamed to
  // its tombstone by then).
  ASSERT_TRUE(Remove("big", Clock::now() - std::chrono::seconds(1), &done).ok());
  EXPECT_FALSE(done);
  EXPECT_TRUE(IsDir(".nodevol-deleting-v"));
  EXPECT_FALSE(Exists(root_ + "/big"));
  int rounds = 0;
  while (!done && rounds++ < 1000)
    ASSERT_TRUE(Remove("big", Clock::now() + std::chrono::milliseconds(1), &done).ok());
  EXPECT_TRUE(done);
  EXPECT_FALSE(Exists(root_ + "/big"));
}

// Issue 30 item 6: a claim that re-creates the volume's directory while
// a delete is under way (a StatefulSet's claim, same pattern) keeps its
// data: the delete renamed the directory to its tombstone first and
// touches nothing else from then on.
TEST_F(ExportDirs, DeleteRemovesOnlyItsTombstone) {
  VolumeRoot vr;
  ASSERT_TRUE(MakeVolumeDir(root_, "ns/claim", vr, false).ok());
  for (int i = 0; i < 50; ++i) Touch(root_ + "/ns/claim/old" + std::to_string(i));
  bool done = true;
  ASSERT_TRUE(Remove("ns/claim", Clock::now() - std::chrono::seconds(1), &done).ok());  // times out at once
  EXPECT_FALSE(done);
  EXPECT_FALSE(Exists(root_ + "/ns/claim"));
  EXPECT_TRUE(IsDir("ns/.nodevol-deleting-v"));
  // The new claim's directory, under the same name.
  ASSERT_TRUE(MakeVolumeDir(root_, "ns/claim", vr, false).ok());
  Touch(root_ + "/ns/claim/new-data");
  // Retried (a new DeleteVolume), until done.
  for (int i = 0; i < 100 && !done; ++i) ASSERT_TRUE(Remove("ns/claim", Clock::now() + std::chrono::seconds(1), &done).ok());
  EXPECT_TRUE(done);
  EXPECT_TRUE(Exists(root_ + "/ns/claim/new-data"));
  EXPECT_FALSE(Exists(root_ + "/ns/.nodevol-deleting-v"));
}

// Issue 25 item 6: a chain 8000 deep is removed on a small stack (the
// recursive removal crashed the daemon's worker) and in bounded memory.
TEST_F(ExportDirs, DeepChainOnASmallStack) {
  VolumeRoot vr;
  ASSERT_TRUE(MakeVolumeDir(root_, "deep", vr, false).ok());
  int fd = ::open((root_ + "/deep").c_str(), O_PATH | O_DIRECTORY);
  for (int i = 0; i < 8000; ++i) {
    ASSERT_EQ(::mkdirat(fd, "d", 0755), 0);
    int next = ::openat(fd, "d", O_PATH | O_DIRECTORY);
    ASSERT_GE(next, 0);
    ::close(fd);
    fd = next;
  }
  ::close(fd);
  // In a child, so that a crash is a failure here rather than the end of
  // the test binary; on a 256 KiB stack.
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    struct Arg {
      std::string root;
      bool ok = false;
    } arg{root_};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_t t;
    pthread_create(&t, &attr,
                   [](void* p) -> void* {
                     auto* a = static_cast<Arg*>(p);
                     RemoveCursor c;
                     bool done = false;
                     for (int i = 0; i < 100000 && !done; ++i)
                       if (!RemoveVolumeDir(a->root, "deep", ".nodevol-deleting-v", Clock::now() + std::chrono::seconds(1),
                                            &c, &done).ok())
                         return nullptr;
                     a->ok = done;
                     return nullptr;
                   },
                   &arg);
    pthread_join(t, nullptr);
    ::_exit(arg.ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the removal died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(Exists(root_ + "/deep"));
  EXPECT_FALSE(Exists(root_ + "/.nodevol-deleting-v"));
}

// Issue 30 item 5: every slice removes something, however short, going
// on from where the last one stopped (the cursor): the old removal listed
// the whole directory first and then had no time left, so a directory
// too big to list within a slice was never deleted.
TEST_F(ExportDirs, BigDirectoryShrinksEverySlice) {
  VolumeRoot vr;
  ASSERT_TRUE(MakeVolumeDir(root_, "huge", vr, false).ok());
  const int n = 1000;
  for (int i = 0; i < n; ++i) {
    int fd = ::open((root_ + "/huge/f" + std::to_string(i)).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ::close(fd);
  }
  RemoveCursor c;
  bool done = false;
  size_t before = n;
  int slices = 0;
  while (!done) {
    // A slice whose time is up before it starts, as when listing alone
    // takes longer than the slice.
    ASSERT_TRUE(Remove("huge", Clock::now() - std::chrono::seconds(1), &done, &c).ok());
    ++slices;
    if (done) break;  // the last slice may have only the empty tombstone left to remove
    size_t now = Count(root_ + "/.nodevol-deleting-v");
    ASSERT_LT(now, before) << "slice " << slices << " removed nothing";
    before = now;
  }
  EXPECT_FALSE(Exists(root_ + "/.nodevol-deleting-v"));
}

// Issue 30 item 4: a name that cannot be looked up (EACCES under a parent
// root cannot search, ESTALE) was taken for an existing one, and the
// archive loop looked for a free name forever. Now it is an error.
TEST_F(ExportDirs, ArchiveFailsWhenNamesCannotBeLookedUp) {
  VolumeRoot vr;
  ASSERT_TRUE(MakeVolumeDir(root_, "locked/claim", vr, false).ok());
  ASSERT_EQ(::chmod((root_ + "/locked").c_str(), 0600), 0);  // no search for others
  ASSERT_EQ(::chmod(root_.c_str(), 0755), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // As nobody, like root on a root-squashed export; a watchdog ends the
    // loop that never would.
    ::alarm(60);
    // (Not root: mode 0600 keeps its owner from searching it all the same.)
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(3);
    std::string as;
    Status st = ArchiveVolumeDir(root_, "locked/claim", &as);
    if (st.ok()) ::_exit(1);
    bool says_why = st.code() == Status::Code::kFailedPrecondition &&
                    st.message().find("Permission denied") != std::string::npos;
    ::_exit(says_why ? 0 : 2);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "ArchiveVolumeDir never returned (signal " << WTERMSIG(status) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: reported success; 2: another error than EACCES";
  EXPECT_TRUE(IsDir("locked/claim"));
}

// Issue 30 item 2: a bind through a directory that is not on NFS (the
// staging mount unmounted or being replaced at that instant) is refused
// and nothing is mounted: the node's own empty directory never reaches a pod.
TEST_F(ExportDirs, BindRefusesWhatIsNotOnNfs) {
  VolumeRoot vr;
  ASSERT_TRUE(MakeVolumeDir(root_, "vol", vr, false).ok());
  ASSERT_EQ(::mkdir((outside_ + "/target").c_str(), 0700), 0);
  Status st = BindBelow(root_, "vol", outside_ + "/target");
  if (st.ok()) ::umount2((outside_ + "/target").c_str(), MNT_DETACH);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.ToString();
  EXPECT_NE(st.message().find("not on NFS"), std::string::npos) << st.message();
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
