// Restarts: what nodevold recorded must match the kernel's mount table
// again after a stop and start, whatever happened to the mounts meanwhile.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sys/mount.h>
#include <sys/wait.h>

#include <csignal>
#include <thread>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "daemon_fixture.h"
#include "mount/mount_table.h"

namespace nodevol::testing {
namespace {

namespace fs = std::filesystem;

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

bool HasMountOption(const std::string& path, const std::string& want) {
  MountTable table;
  if (!table.Load().ok()) return false;
  const MountEntry* e = table.FindTarget(path);
  if (!e) return false;
  std::stringstream ss(e->options);
  for (std::string o; std::getline(ss, o, ',');)
    if (o == want) return true;
  return false;
}

// errno of creating a file in dir (0 = it worked).
int CreateErrno(const std::string& dir) {
  int fd = ::open((dir + "/probe").c_str(), O_CREAT | O_WRONLY, 0644);
  if (fd < 0) return errno;
  ::close(fd);
  ::unlink((dir + "/probe").c_str());
  return 0;
}

class ReconcileTest : public DaemonFixture {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    StartDaemon();
  }

  void Restart() {
    ASSERT_EQ(StopDaemon(), 0);
    StartDaemon();
  }

  std::vector<std::string> Drift() {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::GetInfoResponse resp;
    EXPECT_TRUE(stub()->GetInfo(&ctx, v1::GetInfoRequest(), &resp).ok());
    return {resp.drift().begin(), resp.drift().end()};
  }

  std::string DriftText() {
    std::string s;
    for (const std::string& d : Drift()) s += d + "\n";
    return s;
  }

  // Volume name -> its publication targets.
  std::map<std::string, std::vector<std::string>> Published() {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::ListVolumesResponse resp;
    EXPECT_TRUE(stub()->ListVolumes(&ctx, v1::ListVolumesRequest(), &resp).ok());
    std::map<std::string, std::vector<std::string>> out;
    for (const auto& v : resp.volumes()) {
      auto& targets = out[v.name()];
      targets.assign(v.published_at().begin(), v.published_at().end());
      std::sort(targets.begin(), targets.end());
    }
    return out;
  }

  // Publishes an inline volume at target; its name ("" on failure).
  std::string PublishInline(const std::string& target) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::PublishRequest req;
    req.mutable_inline_()->set_pool("default");
    req.mutable_inline_()->set_size_bytes(1 << 20);
    req.set_target(target);
    v1::PublishResponse resp;
    grpc::Status st = stub()->Publish(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return st.ok() ? resp.volume() : "";
  }

  // An inline volume at `target` holding "pod data", then a power loss
  // that took the mounts and the publication record: the volume record
  // survived, and nodevold has started again.
  void PublishInlineThenLosePower(const std::string& target, std::string* name) {
    *name = PublishInline(target);
    ASSERT_FALSE(name->empty());
    std::ofstream(target + "/scratch") << "pod data";
    KillDaemon();
    ASSERT_EQ(::umount2(target.c_str(), 0), 0);
    for (const auto& e : fs::directory_iterator(state_dir_ + "/publications")) fs::remove(e.path());
    StartDaemon();
  }

  grpc::Status PublishWith(const std::string& volume, const std::string& target, bool read_only,
                           std::vector<std::string> options) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::PublishRequest req;
    req.set_volume(volume);
    req.set_target(target);
    req.set_read_only(read_only);
    for (const std::string& o : options) req.add_mount_options(o);
    v1::PublishResponse resp;
    return stub()->Publish(&ctx, req, &resp);
  }
};

TEST_F(ReconcileTest, PublicationsSurviveACleanRestart) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  ASSERT_TRUE(CreateVolume("v2", 1 << 20).ok());
  std::string a = MakeTarget("pod-1", "data"), b = MakeTarget("pod-2", "data"), c = MakeTarget("pod-2", "other");
  ASSERT_TRUE(Publish("v1", a).ok());
  ASSERT_TRUE(Publish("v1", b, /*read_only=*/true).ok());
  ASSERT_TRUE(Publish("v2", c).ok());
  std::ofstream(a + "/file") << "before restart";

  ASSERT_EQ(StopDaemon(), 0);
  EXPECT_TRUE(IsMountPoint(a)) << "a clean stop must not unmount pods' volumes";
  EXPECT_TRUE(IsMountPoint(b));
  EXPECT_TRUE(IsMountPoint(c));
  StartDaemon();

  EXPECT_EQ(MountsBelow(pods_root_), 3) << "restart must not stack mounts";
  auto published = Published();
  std::vector<std::string> v1_targets = {a, b};
  std::sort(v1_targets.begin(), v1_targets.end());
  EXPECT_EQ(published["v1"], v1_targets);
  EXPECT_EQ(published["v2"], std::vector<std::string>{c});
  EXPECT_TRUE(Drift().empty()) << DriftText();
  EXPECT_EQ(ReadAll(b + "/file"), "before restart");
  EXPECT_EQ(CreateErrno(b), EROFS);
  EXPECT_EQ(CreateErrno(a), 0);

  // The restarted daemon still knows them: idempotent publish, then unpublish.
  EXPECT_TRUE(Publish("v1", a).ok());
  EXPECT_EQ(MountsBelow(pods_root_), 3);
  for (const std::string& t : {a, b, c}) EXPECT_TRUE(Unpublish(t).ok());
  EXPECT_EQ(MountsBelow(root_), 0);
}

TEST_F(ReconcileTest, BindUnmountedWhileStoppedIsRecreated) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data");
  ASSERT_TRUE(Publish("v1", t).ok());
  std::ofstream(t + "/file") << "data";

  ASSERT_EQ(StopDaemon(), 0);
  ASSERT_EQ(::umount2(t.c_str(), 0), 0) << strerror(errno);
  ASSERT_FALSE(IsMountPoint(t));
  StartDaemon();

  EXPECT_TRUE(IsMountPoint(t));
  EXPECT_EQ(MountsBelow(pods_root_), 1);
  EXPECT_EQ(ReadAll(t + "/file"), "data");
  std::vector<std::string> drift = Drift();
  ASSERT_FALSE(drift.empty());
  bool mentioned = false;
  for (const std::string& d : drift) mentioned |= Contains(d, t) && Contains(d, "re-created");
  EXPECT_TRUE(mentioned) << DriftText();
  EXPECT_EQ(Published()["v1"], std::vector<std::string>{t});

  ASSERT_TRUE(Unpublish(t).ok());
  EXPECT_FALSE(IsMountPoint(t));
}

TEST_F(ReconcileTest, RecreatedReadOnlyBindIsStillReadOnly) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data");
  ASSERT_TRUE(PublishWith("v1", t, /*read_only=*/true, {"noexec", "nosuid"}).ok());
  ASSERT_EQ(CreateErrno(t), EROFS);

  ASSERT_EQ(StopDaemon(), 0);
  ASSERT_EQ(::umount2(t.c_str(), 0), 0) << strerror(errno);
  StartDaemon();

  ASSERT_TRUE(IsMountPoint(t));
  EXPECT_EQ(CreateErrno(t), EROFS) << "the re-created bind must be read-only again";
  EXPECT_TRUE(HasMountOption(t, "ro"));
  EXPECT_TRUE(HasMountOption(t, "noexec"));
  EXPECT_TRUE(HasMountOption(t, "nosuid"));
  // The pool itself stayed writable.
  EXPECT_EQ(CreateErrno(pool_dir_ + "/v1"), 0);
}

TEST_F(ReconcileTest, ReadOnlyBindMadeWritableWhileStoppedIsMadeReadOnlyAgain) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data");
  ASSERT_TRUE(Publish("v1", t, /*read_only=*/true).ok());
  ASSERT_EQ(StopDaemon(), 0);
  // Someone remounts the bind read-write behind nodevold's back.
  ASSERT_EQ(::mount(nullptr, t.c_str(), nullptr, MS_BIND | MS_REMOUNT, nullptr), 0) << strerror(errno);
  ASSERT_EQ(CreateErrno(t), 0);
  StartDaemon();

  EXPECT_EQ(CreateErrno(t), EROFS);
  EXPECT_EQ(MountsBelow(pods_root_), 1);
}

TEST_F(ReconcileTest, ForeignMountFoundOnRestartIsLeftAlone) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data");
  ASSERT_TRUE(Publish("v1", t).ok());
  ASSERT_EQ(StopDaemon(), 0);
  ASSERT_EQ(::umount2(t.c_str(), 0), 0);
  ASSERT_EQ(::mount("nodevol-test", t.c_str(), "tmpfs", 0, "size=1m"), 0) << strerror(errno);
  StartDaemon();

  EXPECT_EQ(MountsBelow(pods_root_), 1) << "no bind may be stacked on the foreign mount";
  MountTable table;
  ASSERT_TRUE(table.Load().ok());
  ASSERT_NE(table.FindTarget(t), nullptr);
  EXPECT_EQ(table.FindTarget(t)->fstype, "tmpfs");
  bool mentioned = false;
  for (const std::string& d : Drift()) mentioned |= Contains(d, t);
  EXPECT_TRUE(mentioned) << DriftText();
  ::umount2(t.c_str(), MNT_DETACH);
}

TEST_F(ReconcileTest, TargetRemovedWhileStoppedIsForgotten) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data");
  ASSERT_TRUE(Publish("v1", t).ok());
  ASSERT_EQ(StopDaemon(), 0);
  // kubelet tore the pod down (unmount and remove) without calling us.
  ASSERT_EQ(::umount2(t.c_str(), 0), 0);
  fs::remove_all(pods_root_ + "/pod-1");
  StartDaemon();

  EXPECT_FALSE(fs::exists(t)) << "the daemon must not re-create a removed pod directory";
  EXPECT_TRUE(Published()["v1"].empty());
  bool mentioned = false;
  for (const std::string& d : Drift()) mentioned |= Contains(d, t);
  EXPECT_TRUE(mentioned) << DriftText();
  grpc::Status st = DeleteVolume("v1");
  EXPECT_TRUE(st.ok()) << st.error_message();
}

TEST_F(ReconcileTest, PublishedInlineVolumeSurvivesARestart) {
  std::string t = MakeTarget("pod-1", "scratch");
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::PublishRequest req = InlineRequest(t);
  v1::PublishResponse resp;
  ASSERT_TRUE(stub()->Publish(&ctx, req, &resp).ok());
  std::ofstream(t + "/scratch") << "pod data";

  Restart();
  EXPECT_TRUE(IsMountPoint(t));
  EXPECT_EQ(ReadAll(t + "/scratch"), "pod data") << "an ephemeral volume in use must not be deleted on restart";
  EXPECT_EQ(Published()[resp.volume()], std::vector<std::string>{t});

  ASSERT_TRUE(Unpublish(t).ok());
  EXPECT_TRUE(Published().empty());
  EXPECT_TRUE(fs::is_empty(pool_dir_));
}

// Absence is no leave to delete: a pod directory gone while nodevold was
// away (or kubelet's pods filesystem not mounted yet at boot) looks the
// same, so the inline volume is kept, reported, and DeleteVolume removes it.
TEST_F(ReconcileTest, InlineVolumeOfAPodRemovedWhileStoppedIsKeptAndReported) {
  std::string t = MakeTarget("pod-1", "scratch");
  std::string name = PublishInline(t);
  ASSERT_FALSE(name.empty());
  std::ofstream(t + "/scratch") << "pod data";
  ASSERT_EQ(StopDaemon(), 0);
  ASSERT_EQ(::umount2(t.c_str(), 0), 0);
  fs::rename(pods_root_ + "/pod-1", root_ + "/pod-1-away");  // the pods filesystem is not there yet
  StartDaemon();
  EXPECT_TRUE(Published()[name].empty());
  EXPECT_EQ(ReadAll(pool_dir_ + "/" + name + "/scratch"), "pod data") << "inline volume deleted for want of a record";
  bool mentioned = false;
  for (const std::string& d : Drift()) mentioned |= Contains(d, name) && Contains(d, "kept");
  EXPECT_TRUE(mentioned) << DriftText();

  // The pods filesystem comes back and kubelet publishes again: same data.
  fs::rename(root_ + "/pod-1-away", pods_root_ + "/pod-1");
  EXPECT_EQ(PublishInline(t), name);
  EXPECT_EQ(ReadAll(t + "/scratch"), "pod data");
  ASSERT_TRUE(Unpublish(t).ok());
  EXPECT_TRUE(Published().empty()) << "Unpublish deletes the inline volume";
  EXPECT_TRUE(fs::is_empty(pool_dir_));
}

// Power loss right after an inline Publish: the mounts are gone, and a
// publication record that never reached the disk is gone too. The volume
// record survived; the volume must survive with it.
TEST_F(ReconcileTest, InlineVolumeWhosePublicationRecordIsLostIsKept) {
  std::string t = MakeTarget("pod-1", "scratch"), name;
  ASSERT_NO_FATAL_FAILURE(PublishInlineThenLosePower(t, &name));
  EXPECT_EQ(ReadAll(pool_dir_ + "/" + name + "/scratch"), "pod data");
  EXPECT_EQ(PublishInline(t), name) << "kubelet's republish";
  EXPECT_EQ(ReadAll(t + "/scratch"), "pod data") << "the republish got an empty volume";
  ASSERT_TRUE(Unpublish(t).ok());
  EXPECT_TRUE(fs::is_empty(pool_dir_));
}

// issue 59 item 3: the kept inline volume was deleted, data and all, by
// the first publish of its target that failed after the create step.
TEST_F(ReconcileTest, AKeptInlineVolumeOutlivesAFailedPublish) {
  std::string t = MakeTarget("pod-1", "scratch"), name;
  ASSERT_NO_FATAL_FAILURE(PublishInlineThenLosePower(t, &name));
  // Something else is mounted there now: the publish fails after the
  // (idempotent) create of the inline volume.
  ASSERT_EQ(::mount("nodevol-test", t.c_str(), "tmpfs", 0, "size=1m"), 0) << strerror(errno);
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::PublishRequest req = InlineRequest(t);
  v1::PublishResponse resp;
  EXPECT_EQ(stub()->Publish(&ctx, req, &resp).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  ASSERT_EQ(::umount2(t.c_str(), 0), 0);
  EXPECT_EQ(ReadAll(pool_dir_ + "/" + name + "/scratch"), "pod data") << "the failed publish deleted the volume";
  EXPECT_EQ(PublishInline(t), name);
  EXPECT_EQ(ReadAll(t + "/scratch"), "pod data");
  ASSERT_TRUE(Unpublish(t).ok());
  EXPECT_TRUE(fs::is_empty(pool_dir_));
}

// A record written by a newer nodevold (a downgrade with live pods): this
// one must refuse to start and change nothing, never read it as absent.
TEST_F(ReconcileTest, RecordOfANewerFormatStopsTheStartAndChangesNothing) {
  std::string t = MakeTarget("pod-1", "scratch");
  std::string name = PublishInline(t);
  ASSERT_FALSE(name.empty());
  std::ofstream(t + "/scratch") << "pod data";
  ASSERT_EQ(StopDaemon(), 0);
  std::string pub_file;
  for (const auto& e : fs::directory_iterator(state_dir_ + "/publications")) pub_file = e.path().string();
  std::string rec = ReadAll(pub_file), newer = rec;
  size_t at = newer.find("\"format\": 1");
  ASSERT_NE(at, std::string::npos) << rec;
  newer.replace(at, 11, "\"format\": 3");
  std::ofstream(pub_file, std::ios::trunc) << newer;

  size_t log_before = ReadAll(log_path_).size();
  pid_t pid = SpawnDaemon();
  ASSERT_GT(pid, 0);
  int status = 0;
  bool exited = false;
  // Until it exits or says it is ready (then it started: the bug).
  while (!(exited = waitpid(pid, &status, WNOHANG) == pid)) {
    if (ReadAll(log_path_).find(" ready: ", log_before) != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!exited) {
    ::kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    ADD_FAILURE() << "nodevold started on a record it cannot read";
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << "status " << status;
  EXPECT_TRUE(Contains(ReadAll(log_path_), "newer nodevold")) << ReadAll(log_path_);
  EXPECT_EQ(ReadAll(pub_file), newer) << "the record was moved or changed";
  EXPECT_FALSE(fs::exists(pub_file + ".corrupt"));
  EXPECT_TRUE(IsMountPoint(t)) << "the live bind was touched";
  EXPECT_EQ(ReadAll(t + "/scratch"), "pod data");

  // Upgrading back: everything is as it was.
  std::ofstream(pub_file, std::ios::trunc) << rec;
  StartDaemon();
  EXPECT_EQ(Published()[name], std::vector<std::string>{t});
  EXPECT_TRUE(Drift().empty()) << DriftText();
  ASSERT_TRUE(Unpublish(t).ok());
}

// DeleteVolume must not remove a directory something still shows, wherever
// that bind is (a publication whose record was lost, a bind by hand).
TEST_F(ReconcileTest, DeleteRefusesWhileTheVolumeIsBoundElsewhere) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::ofstream(pool_dir_ + "/v1/file") << "data";
  std::string elsewhere = root_ + "/elsewhere";
  fs::create_directories(elsewhere);
  ASSERT_EQ(::mount((pool_dir_ + "/v1").c_str(), elsewhere.c_str(), nullptr, MS_BIND, nullptr), 0) << strerror(errno);
  grpc::Status st = DeleteVolume("v1");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  EXPECT_TRUE(Contains(st.error_message(), elsewhere)) << st.error_message();
  EXPECT_EQ(ReadAll(elsewhere + "/file"), "data") << "data deleted under a live bind";
  ASSERT_EQ(::umount2(elsewhere.c_str(), 0), 0);
  st = DeleteVolume("v1");
  EXPECT_TRUE(st.ok()) << st.error_message();
}

// A bind of one of our volumes whose publication record is gone: start
// leaves it alone and reports it, and kubelet's Unpublish removes it (it
// would retry forever against "not by nodevold").
TEST_F(ReconcileTest, UnpublishRemovesABindOfAKnownVolumeWithoutARecord) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data");
  ASSERT_TRUE(Publish("v1", t).ok());
  std::ofstream(t + "/file") << "data";
  ASSERT_EQ(StopDaemon(), 0);
  for (const auto& e : fs::directory_iterator(state_dir_ + "/publications")) fs::remove(e.path());
  StartDaemon();
  EXPECT_TRUE(IsMountPoint(t)) << "start must not touch a mount it has no record of";
  bool mentioned = false;
  for (const std::string& d : Drift()) mentioned |= Contains(d, t) && Contains(d, "no publication record");
  EXPECT_TRUE(mentioned) << DriftText();
  grpc::Status st = Unpublish(t);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_FALSE(IsMountPoint(t));
  EXPECT_EQ(ReadAll(pool_dir_ + "/v1/file"), "data") << "unmounting deletes nothing";
}

// Pods evicted for disk pressure must still be torn down when the state
// filesystem is full (a dir pool sharing it filled it): "unpublishing" and
// "deleting" are recorded without allocating.
TEST_F(ReconcileTest, TeardownWorksOnAFullStateFilesystem) {
  ASSERT_EQ(StopDaemon(), 0);
  fs::remove_all(state_dir_);
  fs::create_directories(state_dir_);
  ASSERT_EQ(::mount("nodevol-state", state_dir_.c_str(), "tmpfs", 0, "size=256k,mode=0700"), 0) << strerror(errno);
  StartDaemon();
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data");
  ASSERT_TRUE(Publish("v1", t).ok());
  {
    std::ofstream filler(state_dir_ + "/filler");
    std::string block(4096, 'x');
    while (filler.write(block.data(), block.size()) && filler.flush()) {
    }
  }
  {
    int fd = ::open((state_dir_ + "/probe").c_str(), O_CREAT | O_WRONLY, 0600);
    ASSERT_GE(fd, 0) << strerror(errno);
    char c = 'x';
    ASSERT_EQ(::write(fd, &c, 1), -1) << "the state filesystem is not full";
    EXPECT_EQ(errno, ENOSPC);
    ::close(fd);
    ::unlink((state_dir_ + "/probe").c_str());
  }

  grpc::Status st = Unpublish(t);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_FALSE(IsMountPoint(t));
  st = DeleteVolume("v1");
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(fs::is_empty(pool_dir_));

  // Nothing comes back after a restart.
  fs::remove(state_dir_ + "/filler");
  Restart();
  EXPECT_TRUE(Published().empty());
  EXPECT_TRUE(Drift().empty()) << DriftText();
  ASSERT_EQ(StopDaemon(), 0);
  ASSERT_EQ(::umount2(state_dir_.c_str(), 0), 0);
}

TEST_F(ReconcileTest, PublicationsSurviveAKill) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string a = MakeTarget("pod-1", "data"), b = MakeTarget("pod-2", "data");
  ASSERT_TRUE(Publish("v1", a).ok());
  ASSERT_TRUE(Publish("v1", b, /*read_only=*/true).ok());
  KillDaemon();
  StartDaemon();
  EXPECT_EQ(MountsBelow(pods_root_), 2);
  EXPECT_EQ(Published()["v1"].size(), 2u);
  EXPECT_EQ(CreateErrno(b), EROFS);
  EXPECT_TRUE(Unpublish(a).ok());
  EXPECT_TRUE(Unpublish(b).ok());
  EXPECT_EQ(MountsBelow(root_), 0);
}

}  // namespace
}  // namespace nodevol::testing
