// Publication against the real daemon: bind mounts checked in the kernel's
// mount table, read-only enforced by the kernel, fsGroup, inline ephemeral
// volumes, and foreign mounts left alone.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backend/registry.h"
#include "daemon_fixture.h"
#include "node/node.h"
#include "state/store.h"
#include "mount/mount_table.h"

namespace nodevol::testing {
namespace {

namespace fs = std::filesystem;

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

bool HasOption(const std::string& options, const std::string& want) {
  std::stringstream ss(options);
  for (std::string o; std::getline(ss, o, ',');)
    if (o == want) return true;
  return false;
}

std::string FsType(const std::string& path) {
  MountTable table;
  if (!table.Load().ok()) return "";
  const MountEntry* e = table.FindTarget(path);
  return e ? e->fstype : "";
}

class PublishTest : public DaemonFixture {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    StartDaemon();
  }

  // The volume's data directory in the pool, as the daemon reports it.
  std::string DataDir(const std::string& name) {
    std::string dir = GetVolume(name).attributes().at("path");
    EXPECT_EQ(fs::path(dir).parent_path(), fs::path(pool_dir_));
    return dir;
  }

  grpc::Status PublishReq(const v1::PublishRequest& req, v1::PublishResponse* resp = nullptr) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::PublishResponse r;
    return stub()->Publish(&ctx, req, resp ? resp : &r);
  }

  grpc::Status UnpublishReq(const std::string& target, bool* was_published) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::UnpublishRequest req;
    req.set_target(target);
    v1::UnpublishResponse resp;
    grpc::Status st = stub()->Unpublish(&ctx, req, &resp);
    *was_published = resp.was_published();
    return st;
  }

  grpc::Status Stats(const std::string& target, v1::GetVolumeStatsResponse* resp) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::GetVolumeStatsRequest req;
    req.set_target(target);
    return stub()->GetVolumeStats(&ctx, req, resp);
  }
};

TEST_F(PublishTest, PublishMakesABindMountAndUnpublishRemovesIt) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data");
  ASSERT_TRUE(Publish("v1", t).ok());
  EXPECT_TRUE(IsMountPoint(t));
  EXPECT_EQ(GetVolume("v1").published_at_size(), 1);
  ASSERT_TRUE(Unpublish(t).ok());
  EXPECT_FALSE(IsMountPoint(t));
  EXPECT_EQ(GetVolume("v1").published_at_size(), 0);
}

TEST_F(PublishTest, PublishTwiceIsOkWithOneMount) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data");
  v1::PublishRequest req;
  req.set_volume("v1");
  req.set_target(t);
  v1::PublishResponse r1, r2;
  ASSERT_TRUE(PublishReq(req, &r1).ok());
  grpc::Status again = PublishReq(req, &r2);
  EXPECT_TRUE(again.ok()) << again.error_message();
  EXPECT_EQ(r2.volume(), "v1");
  EXPECT_EQ(r2.target(), r1.target());
  EXPECT_EQ(MountsBelow(pods_root_), 1) << "a second publish must not stack a second bind mount";
  EXPECT_EQ(GetVolume("v1").published_at_size(), 1);
}

TEST_F(PublishTest, UnpublishTwiceIsOk) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data");
  ASSERT_TRUE(Publish("v1", t).ok());
  bool was = false;
  ASSERT_TRUE(UnpublishReq(t, &was).ok());
  EXPECT_TRUE(was);
  grpc::Status again = UnpublishReq(t, &was);
  EXPECT_TRUE(again.ok()) << again.error_message();
  EXPECT_FALSE(was);
  EXPECT_EQ(MountsBelow(root_), 0);
}

TEST_F(PublishTest, UnpublishOfNeverPublishedOrMissingTargetIsOk) {
  bool was = true;
  std::string existing = MakeTarget("pod-1", "never");
  grpc::Status st = UnpublishReq(existing, &was);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_FALSE(was);
  EXPECT_TRUE(fs::is_directory(existing));

  was = true;
  std::string missing = MakeTarget("pod-1", "missing", /*create=*/false);
  st = UnpublishReq(missing, &was);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_FALSE(was);

  // Not even the pod directory exists (kubelet already cleaned up).
  was = true;
  st = UnpublishReq(pods_root_ + "/gone-pod/volumes/nodevol.io~volume/data", &was);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_FALSE(was);
  EXPECT_FALSE(fs::exists(pods_root_ + "/gone-pod")) << "unpublish must not create directories";
}

TEST_F(PublishTest, PublishOfAnotherVolumeOnAPublishedTargetFails) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  ASSERT_TRUE(CreateVolume("v2", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data");
  ASSERT_TRUE(Publish("v1", t).ok());
  WriteFile(DataDir("v1") + "/marker", "v1");

  grpc::Status st = Publish("v2", t);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  EXPECT_EQ(MountsBelow(pods_root_), 1);
  EXPECT_EQ(ReadAll(t + "/marker"), "v1") << "the target must still show v1";
  EXPECT_EQ(GetVolume("v2").published_at_size(), 0);
}

TEST_F(PublishTest, ReadOnlyIsEnforcedByTheKernel) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string data = DataDir("v1");
  WriteFile(data + "/existing", "hello");
  std::string t = MakeTarget("pod-1", "data");
  ASSERT_TRUE(Publish("v1", t, /*read_only=*/true).ok());
  ASSERT_TRUE(IsMountPoint(t));
  EXPECT_TRUE(HasOption(MountOptions(t), "ro")) << MountOptions(t);

  // Root ignores permissions, so only a read-only mount can stop this.
  int fd = ::open((t + "/new").c_str(), O_CREAT | O_WRONLY, 0644);
  int err = errno;
  if (fd >= 0) ::close(fd);
  EXPECT_LT(fd, 0);
  EXPECT_EQ(err, EROFS);
  fd = ::open((t + "/existing").c_str(), O_WRONLY | O_TRUNC);
  err = errno;
  if (fd >= 0) ::close(fd);
  EXPECT_LT(fd, 0);
  EXPECT_EQ(err, EROFS);
  EXPECT_EQ(ReadAll(t + "/existing"), "hello");

  // The volume itself (and the filesystem below the pool) stays writable.
  fd = ::open((data + "/new").c_str(), O_CREAT | O_WRONLY, 0644);
  EXPECT_GE(fd, 0) << strerror(errno);
  if (fd >= 0) ::close(fd);
  EXPECT_TRUE(fs::exists(t + "/new")) << "the read-only bind shows the volume's live data";
}

TEST_F(PublishTest, ReadOnlyMismatchOnTheSameTargetFails) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data");
  ASSERT_TRUE(Publish("v1", t, /*read_only=*/true).ok());
  grpc::Status st = Publish("v1", t, /*read_only=*/false);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::ALREADY_EXISTS) << st.error_message();
  EXPECT_TRUE(HasOption(MountOptions(t), "ro")) << MountOptions(t);
  EXPECT_EQ(MountsBelow(pods_root_), 1);
}

TEST_F(PublishTest, DataWrittenThroughTheTargetLandsInThePool) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data");
  ASSERT_TRUE(Publish("v1", t).ok());
  EXPECT_FALSE(HasOption(MountOptions(t), "ro")) << MountOptions(t);
  fs::create_directories(t + "/sub");
  WriteFile(t + "/sub/file.txt", "written by the pod");
  ASSERT_TRUE(Unpublish(t).ok());

  EXPECT_EQ(ReadAll(DataDir("v1") + "/sub/file.txt"), "written by the pod");
  EXPECT_FALSE(fs::exists(t + "/sub")) << "after unpublish the target dir is the empty pod dir again";

  // Published again elsewhere, the data is still there.
  std::string t2 = MakeTarget("pod-2", "data");
  ASSERT_TRUE(Publish("v1", t2).ok());
  EXPECT_EQ(ReadAll(t2 + "/sub/file.txt"), "written by the pod");
}

TEST_F(PublishTest, MountOptionsReachTheMount) {
  // The pods root on its own tmpfs, so that "only the bind got the flags"
  // looks at a real mount: a remount through a descriptor taken before the
  // bind would set them on the mount holding the target (bind.cc), which
  // is then this tmpfs (and never the host's root).
  ASSERT_EQ(StopDaemon(), 0);
  ASSERT_EQ(::mount("nodevol-pods", pods_root_.c_str(), "tmpfs", 0, "mode=0755"), 0) << std::strerror(errno);
  StartDaemon();
  ASSERT_TRUE(IsMountPoint(pods_root_));
  ASSERT_FALSE(HasOption(MountOptions(pods_root_), "noexec")) << MountOptions(pods_root_);
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data");
  v1::PublishRequest req;
  req.set_volume("v1");
  req.set_target(t);
  req.add_mount_options("noexec");
  req.add_mount_options("nosuid");
  req.add_mount_options("nodev");
  grpc::Status st = PublishReq(req);
  ASSERT_TRUE(st.ok()) << st.error_message();
  std::string opts = MountOptions(t);
  EXPECT_TRUE(HasOption(opts, "noexec")) << opts;
  EXPECT_TRUE(HasOption(opts, "nosuid")) << opts;
  EXPECT_TRUE(HasOption(opts, "nodev")) << opts;
  EXPECT_TRUE(HasOption(opts, "rw")) << opts;
  // Only the bind got the flags, not the mount the pods root is on: its
  // options, and a program beside the target still runs.
  EXPECT_FALSE(HasOption(MountOptions(pods_root_), "noexec")) << MountOptions(pods_root_);
  EXPECT_FALSE(HasOption(MountOptions(pods_root_), "nosuid")) << MountOptions(pods_root_);
  WriteFile(pods_root_ + "/beside.sh", "#!/bin/sh\nexit 0\n");
  ::chmod((pods_root_ + "/beside.sh").c_str(), 0755);
  EXPECT_EQ(::access((pods_root_ + "/beside.sh").c_str(), X_OK), 0) << std::strerror(errno);
  // And the kernel enforces them: an executable file cannot be run.
  WriteFile(t + "/run.sh", "#!/bin/sh\nexit 0\n");
  ::chmod((t + "/run.sh").c_str(), 0755);
  EXPECT_NE(::access((t + "/run.sh").c_str(), X_OK), 0);
  EXPECT_EQ(errno, EACCES);
}

TEST_F(PublishTest, FsGroupIsAppliedToTheVolumeRootAndExistingFiles) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string data = DataDir("v1");
  fs::create_directories(data + "/dir");
  WriteFile(data + "/dir/old-file", "x");
  ::chmod((data + "/dir/old-file").c_str(), 0600);

  std::string t = MakeTarget("pod-1", "data");
  v1::PublishRequest req;
  req.set_volume("v1");
  req.set_target(t);
  req.set_fs_group(4242);
  grpc::Status st = PublishReq(req);
  ASSERT_TRUE(st.ok()) << st.error_message();

  struct stat s;
  ASSERT_EQ(::stat(t.c_str(), &s), 0);
  EXPECT_EQ(s.st_gid, 4242u);
  EXPECT_TRUE(s.st_mode & S_ISGID) << std::oct << s.st_mode;
  EXPECT_TRUE((s.st_mode & (S_IRGRP | S_IWGRP | S_IXGRP)) == (S_IRGRP | S_IWGRP | S_IXGRP)) << std::oct << s.st_mode;
  ASSERT_EQ(::stat((data + "/dir").c_str(), &s), 0);
  EXPECT_EQ(s.st_gid, 4242u);
  EXPECT_TRUE(s.st_mode & S_ISGID);
  ASSERT_EQ(::stat((data + "/dir/old-file").c_str(), &s), 0);
  EXPECT_EQ(s.st_gid, 4242u);
  EXPECT_EQ(s.st_mode & 0777, 0660u) << std::oct << s.st_mode;

  // New files inherit the group through the setgid bit.
  WriteFile(t + "/new-file", "y");
  ASSERT_EQ(::stat((t + "/new-file").c_str(), &s), 0);
  EXPECT_EQ(s.st_gid, 4242u);
}

TEST_F(PublishTest, InlineEphemeralVolumeLivesAsLongAsItsPublication) {
  std::string t = MakeTarget("pod-1", "scratch");
  v1::PublishRequest req = InlineRequest(t);
  v1::PublishResponse resp;
  grpc::Status st = PublishReq(req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_FALSE(resp.volume().empty());
  EXPECT_TRUE(IsMountPoint(t));

  auto vols = ListVolumes();
  ASSERT_EQ(vols.size(), 1u);
  EXPECT_EQ(vols[0].name(), resp.volume());
  EXPECT_TRUE(vols[0].ephemeral());
  EXPECT_EQ(vols[0].state(), v1::VOLUME_STATE_READY);
  EXPECT_EQ(vols[0].size_bytes(), 1u << 20);
  ASSERT_EQ(vols[0].published_at_size(), 1);
  EXPECT_EQ(vols[0].published_at(0), t);
  std::string data = vols[0].attributes().at("path");
  WriteFile(t + "/scratch-data", "tmp");
  EXPECT_TRUE(fs::exists(data + "/scratch-data"));

  // Publishing the same inline volume again is idempotent.
  st = PublishReq(req, &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(ListVolumes().size(), 1u);
  EXPECT_EQ(MountsBelow(pods_root_), 1);

  bool was = false;
  ASSERT_TRUE(UnpublishReq(t, &was).ok());
  EXPECT_TRUE(was);
  EXPECT_FALSE(IsMountPoint(t));
  EXPECT_TRUE(ListVolumes().empty());
  EXPECT_FALSE(fs::exists(data)) << "the inline volume's data must be deleted with it";
  EXPECT_TRUE(fs::is_empty(pool_dir_));
}

TEST_F(PublishTest, DeleteOfAPublishedVolumeFailsAndKeepsEverything) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string data = DataDir("v1");
  WriteFile(data + "/precious", "keep me");
  std::string t = MakeTarget("pod-1", "data");
  ASSERT_TRUE(Publish("v1", t).ok());

  grpc::Status st = DeleteVolume("v1");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();

  grpc::Status get;
  v1::Volume v = GetVolume("v1", &get);
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(v.state(), v1::VOLUME_STATE_READY);
  EXPECT_EQ(ReadAll(data + "/precious"), "keep me");
  EXPECT_EQ(ReadAll(t + "/precious"), "keep me");
  EXPECT_TRUE(IsMountPoint(t));
}

// issue 58 item 2: a publication whose bind was gone answered every
// kubelet retry "unpublish it and publish again", which kubelet never
// does; only a restart of nodevold made the bind again.
// issue 58 item 8: an inline volume whose delete failed at unpublish
// stayed "deleting" until nodevold restarted: kubelet's retry found no
// publication and answered OK at once.
TEST_F(PublishTest, AnUnpublishRetryFinishesAFailedInlineDelete) {
  std::string t = MakeTarget("pod-1", "scratch");
  v1::PublishRequest req = InlineRequest(t);
  v1::PublishResponse resp;
  ASSERT_TRUE(PublishReq(req, &resp).ok());
  std::string data = ListVolumes().at(0).attributes().at("path");
  // Something mounted inside the volume's directory: its delete, which
  // never crosses into another mount, fails.
  fs::create_directory(data + "/sub");
  ASSERT_EQ(::mount("nodevol-test", (data + "/sub").c_str(), "tmpfs", 0, "size=1m"), 0) << strerror(errno);
  bool was = false;
  EXPECT_FALSE(UnpublishReq(t, &was).ok()) << "the delete cannot succeed with a mount inside";
  ASSERT_EQ(ListVolumes().size(), 1u);
  EXPECT_EQ(ListVolumes().at(0).state(), v1::VOLUME_STATE_DELETING);
  grpc::Status st = UnpublishReq(t, &was);
  EXPECT_FALSE(st.ok()) << "a retry said OK while the volume still waits to be deleted";
  ASSERT_EQ(::umount2((data + "/sub").c_str(), MNT_DETACH), 0);
  st = UnpublishReq(t, &was);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(ListVolumes().empty()) << "kubelet's retry did not finish the delete";
  EXPECT_TRUE(fs::is_empty(pool_dir_));
}

TEST_F(PublishTest, APublishRemakesABindThatIsGone) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data");
  ASSERT_TRUE(Publish("v1", t).ok());
  WriteFile(t + "/file", "data");
  ASSERT_EQ(::umount2(t.c_str(), MNT_DETACH), 0) << strerror(errno);
  EXPECT_EQ(MountsBelow(pods_root_), 0);
  grpc::Status st = Publish("v1", t);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(MountsBelow(pods_root_), 1);
  EXPECT_EQ(ReadAll(t + "/file"), "data") << "the bind is of the volume again";
  EXPECT_EQ(GetVolume("v1").published_at_size(), 1);
  ASSERT_TRUE(Publish("v1", t).ok()) << "and a retry after that is the plain idempotent answer";
  EXPECT_EQ(MountsBelow(pods_root_), 1);
  ASSERT_TRUE(Unpublish(t).ok());
  EXPECT_EQ(MountsBelow(pods_root_), 0);
}

TEST_F(PublishTest, ForeignMountIsRefusedAndLeftAlone) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data");
  ASSERT_EQ(::mount("nodevol-test", t.c_str(), "tmpfs", 0, "size=1m"), 0) << strerror(errno);
  WriteFile(t + "/tmpfs-file", "mine");

  grpc::Status st = Publish("v1", t);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  EXPECT_EQ(FsType(t), "tmpfs");
  EXPECT_EQ(MountsBelow(pods_root_), 1) << "nothing may be stacked on the foreign mount";
  EXPECT_EQ(GetVolume("v1").published_at_size(), 0);

  bool was = true;
  st = UnpublishReq(t, &was);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  EXPECT_FALSE(was);
  EXPECT_EQ(FsType(t), "tmpfs") << "nodevold must not unmount what it did not mount";
  EXPECT_EQ(ReadAll(t + "/tmpfs-file"), "mine");
  ::umount2(t.c_str(), MNT_DETACH);
}

TEST_F(PublishTest, VolumeStatsOfPublishedAndUnpublishedTargets) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data");
  ASSERT_TRUE(Publish("v1", t).ok());
  v1::GetVolumeStatsResponse s;
  grpc::Status st = Stats(t, &s);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(s.volume(), "v1");
  EXPECT_GT(s.total_bytes(), 0u);
  EXPECT_GT(s.total_inodes(), 0u);
  EXPECT_LE(s.used_bytes(), s.total_bytes());
  EXPECT_LE(s.available_bytes(), s.total_bytes());
  EXPECT_LE(s.used_inodes(), s.total_inodes());

  std::string other = MakeTarget("pod-2", "data");
  st = Stats(other, &s);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();

  ASSERT_TRUE(Unpublish(t).ok());
  st = Stats(t, &s);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();
}

TEST_F(PublishTest, PublishOfAnUnknownVolumeIsNotFoundAndMountsNothing) {
  std::string t = MakeTarget("pod-1", "data");
  grpc::Status st = Publish("no-such-volume", t);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();
  EXPECT_EQ(MountsBelow(root_), 0);
}

TEST_F(PublishTest, OneVolumeAtSeveralTargetsSharesTheData) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string a = MakeTarget("pod-1", "data"), b = MakeTarget("pod-2", "data");
  ASSERT_TRUE(Publish("v1", a).ok());
  ASSERT_TRUE(Publish("v1", b, /*read_only=*/true).ok());
  WriteFile(a + "/shared", "both");
  EXPECT_EQ(ReadAll(b + "/shared"), "both");
  EXPECT_EQ(GetVolume("v1").published_at_size(), 2);
  ASSERT_TRUE(Unpublish(a).ok());
  EXPECT_TRUE(IsMountPoint(b)) << "unpublishing one target must leave the other";
  EXPECT_EQ(ReadAll(b + "/shared"), "both");
}

// kubelet makes the target before it calls mount: a missing one belongs to
// a pod that is gone, and a bind made there would never be torn down.
TEST_F(PublishTest, MissingTargetDirectoryIsRefused) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data", /*create=*/false);
  ASSERT_FALSE(fs::exists(t));
  grpc::Status st = Publish("v1", t);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  EXPECT_NE(st.error_message().find("does not exist"), std::string::npos) << st.error_message();
  EXPECT_FALSE(fs::exists(t)) << "Publish must not create the target";
  EXPECT_EQ(GetVolume("v1").published_at_size(), 0);

  // Nor an inline volume for it.
  v1::PublishRequest req = InlineRequest(t);
  v1::PublishResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  EXPECT_EQ(stub()->Publish(&ctx, req, &resp).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_FALSE(fs::exists(t));
  EXPECT_EQ(ListVolumes().size(), 1u);
}

// A Publish whose caller has stopped waiting (the flex driver's timeout
// during a long fsGroup) must not leave a bind: kubelet never tears down a
// mount whose call failed. The domain is driven directly (the deadline is
// what gRPC passes in), with real mounts.
TEST_F(PublishTest, PublishPastItsDeadlineUndoesItself) {
  ASSERT_EQ(StopDaemon(), 0);
  std::string state = root_ + "/node-state";
  Store store(state);
  ASSERT_TRUE(store.Open().ok());
  std::map<std::string, std::unique_ptr<Backend>> pools;
  ASSERT_TRUE(MakeBackend("default", "dir", {{"path", pool_dir_}}, &pools["default"]).ok());
  Node node(fs::canonical(pods_root_).string(), &store, std::move(pools));
  InlinePolicy inline_on;
  inline_on.allowed = true;
  node.SetInlinePolicies({{"default", inline_on}});  // pools refuse inline volumes unless told
  ASSERT_TRUE(node.Start().ok());
  VolumeView view;
  ASSERT_TRUE(node.CreateVolume({"v1", "default", 1 << 20, "", {}}, &view).ok());
  std::string a = MakeTarget("pod-1", "data"), b = MakeTarget("pod-2", "scratch");
  PublishArgs args;
  args.volume = "v1";
  args.target = a;
  args.fs_group = 4242;
  args.deadline = std::chrono::system_clock::now() - std::chrono::seconds(1);
  std::string volume, target;
  Status st = node.Publish(args, &volume, &target);
  EXPECT_EQ(st.code(), Status::Code::kDeadlineExceeded) << st.message();
  EXPECT_FALSE(IsMountPoint(a)) << "a bind nobody waits for was left";
  EXPECT_TRUE(fs::is_empty(state + "/publications"));

  PublishArgs inl;
  inl.inline_spec = InlineSpec{"default", 1 << 20, "", {}};
  inl.target = b;
  inl.deadline = args.deadline;
  st = node.Publish(inl, &volume, &target);
  EXPECT_EQ(st.code(), Status::Code::kDeadlineExceeded) << st.message();
  EXPECT_FALSE(IsMountPoint(b));
  EXPECT_FALSE(fs::exists(pool_dir_ + "/" + volume)) << "the inline volume made for it stays";

  args.deadline = std::chrono::system_clock::now() + std::chrono::hours(1);
  st = node.Publish(args, &volume, &target);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_TRUE(IsMountPoint(a));
  bool was = false;
  EXPECT_TRUE(node.Unpublish(a, &was).ok());
  EXPECT_FALSE(IsMountPoint(a));
}

// A read-only publication whose bind was made writable behind nodevold's
// back is not "already published": a repeat Publish must not accept it.
TEST_F(PublishTest, RepeatPublishRefusesAReadOnlyBindMadeWritable) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data");
  ASSERT_TRUE(Publish("v1", t, /*read_only=*/true).ok());
  ASSERT_TRUE(Publish("v1", t, /*read_only=*/true).ok()) << "the plain repeat is idempotent";
  ASSERT_EQ(::mount(nullptr, t.c_str(), nullptr, MS_BIND | MS_REMOUNT, nullptr), 0) << strerror(errno);
  grpc::Status st = Publish("v1", t, /*read_only=*/true);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << "a writable bind accepted as read-only";
  EXPECT_NE(st.error_message().find("read-write"), std::string::npos) << st.error_message();
  EXPECT_TRUE(Unpublish(t).ok());
  EXPECT_FALSE(IsMountPoint(t));
}

TEST_F(PublishTest, SymlinkStayingInsideIsResolved) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data");
  std::string alias = fs::path(t).parent_path().string() + "/alias";
  fs::create_symlink(t, alias);
  v1::PublishRequest req;
  req.set_volume("v1");
  req.set_target(alias);
  v1::PublishResponse resp;
  grpc::Status st = PublishReq(req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.target(), t) << "the response names the resolved target";
  EXPECT_TRUE(IsMountPoint(t));
  EXPECT_EQ(GetVolume("v1").published_at(0), t);
  bool was = false;
  ASSERT_TRUE(UnpublishReq(alias, &was).ok());
  EXPECT_TRUE(was);
  EXPECT_FALSE(IsMountPoint(t));
}

TEST_F(PublishTest, FsGroupIsNotAppliedToReadOnlyPublications) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string data = DataDir("v1");
  struct stat before;
  ASSERT_EQ(::stat(data.c_str(), &before), 0);
  std::string t = MakeTarget("pod-1", "data");
  v1::PublishRequest req;
  req.set_volume("v1");
  req.set_target(t);
  req.set_read_only(true);
  req.set_fs_group(4242);
  grpc::Status st = PublishReq(req);
  ASSERT_TRUE(st.ok()) << st.error_message();
  struct stat after;
  ASSERT_EQ(::stat(data.c_str(), &after), 0);
  EXPECT_EQ(after.st_gid, before.st_gid);
  EXPECT_EQ(after.st_mode, before.st_mode);
}

TEST_F(PublishTest, BusyTargetFailsToUnpublishAndCanBeRetried) {
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string t = MakeTarget("pod-1", "data");
  ASSERT_TRUE(Publish("v1", t).ok());
  int fd = ::open((t + "/held-open").c_str(), O_CREAT | O_WRONLY, 0644);
  ASSERT_GE(fd, 0);

  grpc::Status st = Unpublish(t);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  EXPECT_TRUE(IsMountPoint(t)) << "a busy target must not be detached";
  EXPECT_EQ(GetVolume("v1").published_at_size(), 1) << "the publication is still there";
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::DeleteVolumeRequest del;
  del.set_name("v1");
  v1::DeleteVolumeResponse dresp;
  EXPECT_EQ(stub()->DeleteVolume(&ctx, del, &dresp).error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  ::close(fd);
  bool was = false;
  st = UnpublishReq(t, &was);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(was);
  EXPECT_FALSE(IsMountPoint(t));
  EXPECT_TRUE(fs::exists(DataDir("v1") + "/held-open"));
}

// An inline volume is created for its publication; when that publication
// is refused, the volume must not stay behind in the pool.
TEST_F(PublishTest, RefusedInlinePublicationLeavesNoVolume) {
  std::string t = MakeTarget("pod-1", "scratch");
  ASSERT_EQ(::mount("nodevol-test", t.c_str(), "tmpfs", 0, "size=1m"), 0) << strerror(errno);
  v1::PublishRequest req = InlineRequest(t);
  grpc::Status st = PublishReq(req);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  EXPECT_EQ(FsType(t), "tmpfs");
  EXPECT_TRUE(ListVolumes().empty()) << "leaked inline volume " << ListVolumes()[0].name();
  EXPECT_TRUE(fs::is_empty(pool_dir_));
  ::umount2(t.c_str(), MNT_DETACH);
}

}  // namespace
}  // namespace nodevol::testing
