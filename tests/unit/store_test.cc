#include "state/store.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <fstream>

#include "base/atomic_file.h"

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

  // What a nodevold starting on the state dir now would load.
  struct Loaded {
    std::vector<VolumeRecord> vols;
    std::vector<PublicationRecord> pubs;
    std::vector<std::string> problems;
  };
  void Reload(Loaded* out) {
    Store s(dir_);
    ASSERT_TRUE(s.Open().ok());
    ASSERT_TRUE(s.Load(&out->vols, &out->pubs, &out->problems).ok());
  }

  static VolumeRecord Volume(const std::string& name) {
    VolumeRecord v;
    v.spec = {name, "default", 1 << 20, "", {{"mode", "0750"}}};
    v.backend = "dir";
    v.state = VolumeState::kReady;
    v.created_unix = 1700000000;
    v.attributes = {{"path", "/srv/" + name}};
    return v;
  }
  // Volume v1 published at one pod volume directory.
  static PublicationRecord Publication(PublicationState state) {
    PublicationRecord p;
    p.target = "/pods/u/volumes/nodevol.io~volume/data";
    p.volume = "v1";
    p.source = "/srv/v1";
    p.state = state;
    return p;
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
  Loaded l;
  ASSERT_NO_FATAL_FAILURE(Reload(&l));
  ASSERT_EQ(l.vols.size(), 1u);
  EXPECT_EQ(l.vols[0].spec.name, "good");
  ASSERT_EQ(l.problems.size(), 1u);
  EXPECT_NE(l.problems[0].find("bad.json"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir_ + "/volumes/bad.json.corrupt")) << "kept for the operator";
  EXPECT_FALSE(fs::exists(dir_ + "/volumes/bad.json"));
}

// A power loss can leave a publication record (never fsync'ed) empty: it is
// moved aside like any unreadable record, and the report says why.
TEST_F(StoreTest, AnEmptiedPublicationRecordIsReportedAsAPowerLossLeavesIt) {
  {
    Store s(dir_);
    ASSERT_TRUE(s.Open().ok());
  }
  std::ofstream(dir_ + "/publications/0123abcd.json").flush();
  Loaded l;
  ASSERT_NO_FATAL_FAILURE(Reload(&l));
  EXPECT_TRUE(l.pubs.empty());
  ASSERT_EQ(l.problems.size(), 1u);
  EXPECT_NE(l.problems[0].find("the file is empty, as a power loss leaves a record that was not fsync'ed"),
            std::string::npos)
      << l.problems[0];
  EXPECT_TRUE(fs::exists(dir_ + "/publications/0123abcd.json.corrupt"));
}

// A downgrade: records of a newer nodevold are neither corrupt nor absent.
TEST_F(StoreTest, RoundTripsSnapshotsAndTheirDeletingTombstone) {
  Store s(dir_);
  ASSERT_TRUE(s.Open().ok());
  SnapshotRecord snap{"s1", "v1", "thin", "lvm", 64 << 20, "xfs", false, VolumeState::kReady, 1700000001,
                      {{"lv", "nvs-s1"}}};
  ASSERT_TRUE(s.PutSnapshot(snap).ok());
  std::vector<SnapshotRecord> got;
  std::vector<std::string> problems;
  ASSERT_TRUE(s.LoadSnapshots(&got, &problems).ok());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].source, "v1");
  EXPECT_EQ(got[0].size_bytes, uint64_t{64} << 20);
  EXPECT_EQ(got[0].fs_type, "xfs");
  EXPECT_EQ(got[0].state, VolumeState::kReady);
  EXPECT_EQ(got[0].attributes.at("lv"), "nvs-s1");
  // "deleting" that cannot be written as a new file: the rename says it.
  ASSERT_EQ(::rename((dir_ + "/snapshots/s1.json").c_str(), (dir_ + "/snapshots/s1.json.deleting").c_str()), 0);
  got.clear();
  ASSERT_TRUE(s.LoadSnapshots(&got, &problems).ok());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].state, VolumeState::kDeleting);
  ASSERT_TRUE(s.RemoveSnapshot("s1").ok());
  got.clear();
  ASSERT_TRUE(s.LoadSnapshots(&got, &problems).ok());
  EXPECT_TRUE(got.empty());
  EXPECT_TRUE(problems.empty());
}

// A volume being made from a snapshot is format 2 (a format-1 nodevold
// would resume it by making an empty filesystem); ready, it is format 1.
TEST_F(StoreTest, VolumeMadeFromASourceIsFormat2OnlyWhileCreating) {
  Store s(dir_);
  ASSERT_TRUE(s.Open().ok());
  VolumeRecord v = Volume("r1");
  v.spec.from_snapshot = "s1";
  v.state = VolumeState::kCreating;
  ASSERT_TRUE(s.PutVolume(v).ok());
  std::string text;
  ASSERT_TRUE(ReadWholeFile(dir_ + "/volumes/r1.json", &text).ok());
  EXPECT_NE(text.find("\"format\": 2"), std::string::npos) << text;
  v.state = VolumeState::kReady;
  ASSERT_TRUE(s.PutVolume(v).ok());
  ASSERT_TRUE(ReadWholeFile(dir_ + "/volumes/r1.json", &text).ok());
  EXPECT_NE(text.find("\"format\": 1"), std::string::npos) << text;
  ASSERT_TRUE(s.PutVolume(Volume("plain")).ok());
  ASSERT_TRUE(ReadWholeFile(dir_ + "/volumes/plain.json", &text).ok());
  EXPECT_NE(text.find("\"format\": 1"), std::string::npos) << text;
  EXPECT_EQ(text.find("from_"), std::string::npos) << text;
  std::vector<VolumeRecord> vols;
  std::vector<PublicationRecord> pubs;
  std::vector<std::string> problems;
  ASSERT_TRUE(s.Load(&vols, &pubs, &problems).ok());
  ASSERT_EQ(vols.size(), 2u);
  EXPECT_EQ(vols[1].spec.name, "r1");
  EXPECT_EQ(vols[1].spec.from_snapshot, "s1");
  EXPECT_EQ(vols[0].spec.from_snapshot, "");
}

TEST_F(StoreTest, RecordOfANewerFormatFailsTheLoadAndIsLeftAlone) {
  {
    Store s(dir_);
    ASSERT_TRUE(s.Open().ok());
    ASSERT_TRUE(s.PutVolume(Volume("good")).ok());
  }
  std::string newer = "{\"format\": 3, \"name\": \"v2\", \"something\": \"new\"}\n";
  std::ofstream(dir_ + "/volumes/v2.json") << newer;
  std::ofstream(dir_ + "/volumes/bad.json") << "{\"format\": 1, \"name\": ";
  Store s(dir_);
  ASSERT_TRUE(s.Open().ok());
  std::vector<VolumeRecord> vols;
  std::vector<PublicationRecord> pubs;
  std::vector<std::string> problems;
  Status st = s.Load(&vols, &pubs, &problems);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("v2.json"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("newer nodevold"), std::string::npos) << st.message();
  std::string got;
  ASSERT_TRUE(ReadWholeFile(dir_ + "/volumes/v2.json", &got).ok());
  EXPECT_EQ(got, newer);
  EXPECT_FALSE(fs::exists(dir_ + "/volumes/v2.json.corrupt"));
  EXPECT_TRUE(fs::exists(dir_ + "/volumes/bad.json")) << "a failed load moves nothing aside";
}

// EIO or EMFILE reading a good record: the load fails and moves nothing.
// (A directory named like a record makes read(2) fail with EISDIR.)
TEST_F(StoreTest, RecordThatCannotBeReadFailsTheLoadAndIsLeftAlone) {
  {
    Store s(dir_);
    ASSERT_TRUE(s.Open().ok());
    ASSERT_TRUE(s.PutVolume(Volume("good")).ok());
  }
  fs::create_directory(dir_ + "/volumes/unreadable.json");
  Store s(dir_);
  ASSERT_TRUE(s.Open().ok());
  std::vector<VolumeRecord> vols;
  std::vector<PublicationRecord> pubs;
  std::vector<std::string> problems;
  Status st = s.Load(&vols, &pubs, &problems);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("unreadable.json"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("nothing was changed"), std::string::npos) << st.message();
  EXPECT_TRUE(fs::is_directory(dir_ + "/volumes/unreadable.json"));
  EXPECT_FALSE(fs::exists(dir_ + "/volumes/unreadable.json.corrupt"));
  EXPECT_TRUE(problems.empty());
}

// A full state filesystem must not block teardown: when "deleting" or
// "unpublishing" cannot be written as a new file, the record is renamed to
// a tombstone that loads as that state. (A directory where the temp file
// goes makes the write fail as ENOSPC would.)
TEST_F(StoreTest, TeardownIntentIsRecordedWhenANewFileCannotBeWritten) {
  PublicationRecord p = Publication(PublicationState::kPublished);
  {
    Store s(dir_);
    ASSERT_TRUE(s.Open().ok());
    ASSERT_TRUE(s.PutVolume(Volume("v1")).ok());
    ASSERT_TRUE(s.PutPublication(p).ok());
  }
  std::string pub_name;
  for (const auto& e : fs::directory_iterator(dir_ + "/publications")) pub_name = e.path().filename().string();
  Store s(dir_);
  ASSERT_TRUE(s.Open().ok());
  fs::create_directory(dir_ + "/volumes/.tmp-v1.json");
  fs::create_directory(dir_ + "/publications/.tmp-" + pub_name + ".unpublishing");
  VolumeRecord v = Volume("v1");
  v.state = VolumeState::kDeleting;
  ASSERT_TRUE(s.PutVolume(v).ok());
  p.state = PublicationState::kUnpublishing;
  ASSERT_TRUE(s.PutPublication(p).ok());
  VolumeRecord ready = Volume("v1");
  EXPECT_FALSE(s.PutVolume(ready).ok()) << "only teardown states fall back to a rename";
  EXPECT_TRUE(fs::exists(dir_ + "/volumes/v1.json.deleting"));
  EXPECT_FALSE(fs::exists(dir_ + "/volumes/v1.json"));

  std::vector<VolumeRecord> vols;
  std::vector<PublicationRecord> pubs;
  std::vector<std::string> problems;
  ASSERT_TRUE(s.Load(&vols, &pubs, &problems).ok());
  ASSERT_EQ(vols.size(), 1u);
  EXPECT_EQ(vols[0].state, VolumeState::kDeleting);
  ASSERT_EQ(pubs.size(), 1u);
  EXPECT_EQ(pubs[0].state, PublicationState::kUnpublishing);
  EXPECT_TRUE(problems.empty());

  ASSERT_TRUE(s.RemovePublication(p.target).ok());
  ASSERT_TRUE(s.RemoveVolume("v1").ok());
  vols.clear();
  pubs.clear();
  ASSERT_TRUE(s.Load(&vols, &pubs, &problems).ok());
  EXPECT_TRUE(vols.empty());
  EXPECT_TRUE(pubs.empty());
}

// A publication's record is written once, before mounting; each later step
// is a rename, so what a kill -9 leaves is one whole record under the name
// of the last step that finished.
TEST_F(StoreTest, APublicationMovesThroughItsStatesByRenames) {
  Store s(dir_);
  ASSERT_TRUE(s.Open().ok());
  PublicationRecord p = Publication(PublicationState::kPublishing);
  p.mount_options = {"nosuid", "nodev"};
  auto files = [&] {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_ + "/publications")) names.push_back(e.path().filename().string());
    return names;
  };
  auto loaded = [&](PublicationState want) {
    std::vector<VolumeRecord> vols;
    std::vector<PublicationRecord> pubs;
    std::vector<std::string> problems;
    ASSERT_TRUE(s.Load(&vols, &pubs, &problems).ok());
    ASSERT_EQ(pubs.size(), 1u) << "one record, whatever its files";
    EXPECT_EQ(pubs[0].state, want);
    EXPECT_EQ(pubs[0].mount_options, p.mount_options);
    EXPECT_TRUE(problems.empty());
  };
  p.state = PublicationState::kPublishing;
  ASSERT_TRUE(s.PutPublication(p).ok());
  ASSERT_EQ(files().size(), 1u);
  std::string base = files()[0].substr(0, files()[0].rfind(".json") + 5);
  EXPECT_EQ(files()[0], base + ".publishing");
  loaded(PublicationState::kPublishing);
  auto ino = [&](const std::string& n) {
    struct stat st;
    return ::stat((dir_ + "/publications/" + n).c_str(), &st) == 0 ? st.st_ino : 0;
  };
  ino_t first = ino(base + ".publishing");

  p.state = PublicationState::kPublished;
  ASSERT_TRUE(s.MovePublication(p, PublicationState::kPublishing).ok());
  EXPECT_EQ(files(), std::vector<std::string>{base});
  EXPECT_EQ(ino(base), first) << "renamed, not written again";
  loaded(PublicationState::kPublished);

  p.state = PublicationState::kUnpublishing;
  ASSERT_TRUE(s.MovePublication(p, PublicationState::kPublished).ok());
  EXPECT_EQ(files(), std::vector<std::string>{base + ".unpublishing"});
  EXPECT_EQ(ino(base + ".unpublishing"), first);
  loaded(PublicationState::kUnpublishing);

  ASSERT_TRUE(s.RemovePublication(p.target).ok());
  EXPECT_TRUE(files().empty());
}

// Two names for one record (a crash inside PutPublication, which writes the
// new name before dropping the old): the later state is the one on disk.
TEST_F(StoreTest, TheLaterStateWinsWhereACrashLeftTwoNames) {
  PublicationRecord p = Publication(PublicationState::kPublishing);
  Store s(dir_);
  ASSERT_TRUE(s.Open().ok());
  ASSERT_TRUE(s.PutPublication(p).ok());
  std::string dir = dir_ + "/publications", pub;
  for (const auto& e : fs::directory_iterator(dir)) pub = e.path().filename().string();
  std::string base = pub.substr(0, pub.rfind(".json") + 5);
  auto state_with = [&](const std::vector<std::string>& extra) {
    for (const std::string& suffix : extra) fs::copy_file(dir + "/" + pub, dir + "/" + base + suffix);
    std::vector<VolumeRecord> vols;
    std::vector<PublicationRecord> pubs;
    std::vector<std::string> problems;
    EXPECT_TRUE(s.Load(&vols, &pubs, &problems).ok());
    for (const std::string& suffix : extra) fs::remove(dir + "/" + base + suffix);
    EXPECT_EQ(pubs.size(), 1u);
    return pubs.empty() ? PublicationState::kPublishing : pubs[0].state;
  };
  EXPECT_EQ(state_with({""}), PublicationState::kPublished);
  EXPECT_EQ(state_with({".unpublishing"}), PublicationState::kUnpublishing);
  EXPECT_EQ(state_with({"", ".unpublishing"}), PublicationState::kUnpublishing);
}

// A record of an older nodevold says its state inside a plain file: read as
// written, and moved on by a write where there is nothing to rename.
TEST_F(StoreTest, AnOlderPlainRecordKeepsItsStateAndMovesOn) {
  PublicationRecord p = Publication(PublicationState::kPublished);
  Store s(dir_);
  ASSERT_TRUE(s.Open().ok());
  ASSERT_TRUE(s.PutPublication(p).ok());
  std::string dir = dir_ + "/publications", pub;
  for (const auto& e : fs::directory_iterator(dir)) pub = e.path().filename().string();
  std::string text;
  ASSERT_TRUE(ReadWholeFile(dir + "/" + pub, &text).ok());
  size_t at = text.find("\"published\"");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 11, "\"publishing\"");
  ASSERT_TRUE(WriteFileAtomic(dir, pub, text).ok());

  std::vector<VolumeRecord> vols;
  std::vector<PublicationRecord> pubs;
  std::vector<std::string> problems;
  ASSERT_TRUE(s.Load(&vols, &pubs, &problems).ok());
  ASSERT_EQ(pubs.size(), 1u);
  EXPECT_EQ(pubs[0].state, PublicationState::kPublishing);

  p.state = PublicationState::kPublished;
  ASSERT_TRUE(s.MovePublication(p, PublicationState::kPublishing).ok());
  pubs.clear();
  ASSERT_TRUE(s.Load(&vols, &pubs, &problems).ok());
  ASSERT_EQ(pubs.size(), 1u);
  EXPECT_EQ(pubs[0].state, PublicationState::kPublished);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
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

// issue 60 item 6: a temp file left by a killed write (0644 here) kept its
// mode, and the key written over it was readable by everyone.
TEST(AtomicFile, ALeftoverTempFileDoesNotGiveItsMode) {
  char tmpl[] = "/tmp/nodevol-atomic-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string d = tmpl;
  int fd = ::open((d + "/.tmp-tls.key").c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fchmod(fd, 0644), 0);
  ::close(fd);
  ASSERT_TRUE(WriteFileAtomic(d, "tls.key", "secret").ok());
  struct stat st;
  ASSERT_EQ(::stat((d + "/tls.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  fs::remove_all(d);
}

// What the durability trace below records: run under strace by it.
TEST(StoreTrace, DISABLED_WriteRecords) {
  const char* dir = std::getenv("NODEVOL_TRACE_DIR");
  if (!dir) GTEST_SKIP() << "run by StoreTrace.DurableRecordsAreFsyncedAroundTheRename";
  Store s(dir);
  ASSERT_TRUE(s.Open().ok());
  VolumeRecord v;
  v.spec = {"v1", "default", 1 << 20, "", {}};
  v.state = VolumeState::kReady;
  ASSERT_TRUE(s.PutVolume(v).ok());
  PublicationRecord p;
  p.volume = "v1";
  p.source = "/srv/v1";
  p.target = "/pods/durable";
  ASSERT_TRUE(s.PutPublication(p, /*durable=*/true).ok());
  p.target = "/pods/plain";
  ASSERT_TRUE(s.PutPublication(p).ok());
}

// The power-loss promise of store.h, checked on the system calls: a durable
// record is fsync'ed as a temp file before the rename and its directory is
// fsync'ed after it; a plain publication record is renamed without either.
TEST(StoreTrace, DurableRecordsAreFsyncedAroundTheRename) {
  if (::access("/usr/bin/strace", X_OK) != 0) GTEST_SKIP() << "strace is not installed (apt-get install strace)";
  char tmpl[] = "/tmp/nodevol-trace-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string d = tmpl, state = d + "/state", trace = d + "/trace";
  std::string self = fs::read_symlink("/proc/self/exe").string();
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv("NODEVOL_TRACE_DIR", state.c_str(), 1);
    // In the ASan tree (tests/sanitize): LeakSanitizer stops a process
    // that runs under ptrace; ASan itself still checks the traced run.
    std::string asan = "detect_leaks=0";
    if (const char* o = ::getenv("ASAN_OPTIONS")) asan = std::string(o) + ":" + asan;
    ::setenv("ASAN_OPTIONS", asan.c_str(), 1);
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::execl("/usr/bin/strace", "strace", "-f", "-qq", "-o", trace.c_str(), "-e",
            "trace=openat,fsync,fdatasync,rename,renameat,renameat2", self.c_str(),
            "--gtest_also_run_disabled_tests", "--gtest_filter=StoreTrace.DISABLED_WriteRecords",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "strace run failed, status " << status;

  // Events in order: ("open", path, fd), ("fsync", path of fd), ("rename", to).
  struct Event {
    std::string kind, path;
  };
  std::vector<Event> events;
  std::map<std::string, std::string> fd_path;
  std::ifstream in(trace);
  // strace pads short calls: "fsync(3)         = 0".
  std::regex open_re(R"re(openat\(AT_FDCWD, "([^"]+)".*\)\s+= (\d+))re");
  std::regex fsync_re(R"re((?:fsync|fdatasync)\((\d+)\)\s+= 0)re");
  std::regex rename_re(R"re(rename(?:at2?)?\(.*"([^"]+)", .*"([^"]+)".*\)\s+= 0)re");
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_search(line, m, open_re)) fd_path[m[2]] = m[1];
    else if (std::regex_search(line, m, fsync_re)) events.push_back({"fsync", fd_path[m[1]]});
    else if (std::regex_search(line, m, rename_re)) events.push_back({"rename " + std::string(m[1]), m[2]});
  }
  auto find = [&](const std::string& kind, const std::string& path) {
    for (size_t i = 0; i < events.size(); ++i)
      if (events[i].kind == kind && events[i].path == path) return static_cast<int>(i);
    return -1;
  };
  auto rename_to = [&](const std::string& path) {
    for (size_t i = 0; i < events.size(); ++i)
      if (events[i].kind.rfind("rename ", 0) == 0 && events[i].path == path) return static_cast<int>(i);
    return -1;
  };
  std::string all;
  for (const Event& e : events) all += e.kind + " " + e.path + "\n";

  auto durable = [&](const std::string& dir, const std::string& name) {
    int r = rename_to(dir + "/" + name);
    ASSERT_GE(r, 0) << name << " never renamed into place:\n" << all;
    EXPECT_EQ(events[r].kind, "rename " + dir + "/.tmp-" + name);
    int f = find("fsync", dir + "/.tmp-" + name);
    EXPECT_GE(f, 0) << name << ": temp file never fsync'ed:\n" << all;
    EXPECT_LT(f, r) << name << ": fsync after the rename:\n" << all;
    bool dir_after = false;
    for (size_t i = r + 1; i < events.size(); ++i) dir_after |= events[i].kind == "fsync" && events[i].path == dir;
    EXPECT_TRUE(dir_after) << name << ": directory not fsync'ed after the rename:\n" << all;
  };
  durable(state + "/volumes", "v1.json");
  std::string pubs = state + "/publications";
  std::vector<std::string> pub_files;
  for (const auto& e : fs::directory_iterator(pubs)) pub_files.push_back(e.path().filename().string());
  ASSERT_EQ(pub_files.size(), 2u);
  // Which file is which: the durable one was written first.
  std::string first = rename_to(pubs + "/" + pub_files[0]) < rename_to(pubs + "/" + pub_files[1]) ? pub_files[0]
                                                                                                   : pub_files[1];
  std::string plain = first == pub_files[0] ? pub_files[1] : pub_files[0];
  durable(pubs, first);
  EXPECT_GE(rename_to(pubs + "/" + plain), 0) << all;
  EXPECT_LT(find("fsync", pubs + "/.tmp-" + plain), 0) << "a plain publication record was fsync'ed:\n" << all;
  fs::remove_all(d);
}

}  // namespace
}  // namespace nodevol
