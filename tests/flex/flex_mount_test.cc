// mount / unmount through the driver against a real nodevold: the kernel's
// mount table, kernel-enforced read-only, fsGroup on the volume root, what
// kubelet sends (escapes, secrets, unknown keys), bad input changing nothing,
// and kubelet's concurrency across pods.
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "flex_fixture.h"
#include "mount/mount_table.h"

namespace nodevol::testing {
namespace {

namespace fs = std::filesystem;

// Creates path with text; returns 0 or the errno of open/write.
int WriteFile(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  int err = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) ? 0 : errno;
  ::close(fd);
  return err;
}

class FlexMountTest : public FlexTest {
 protected:
  // A named volume (the PV case) and its pod volume directory.
  std::string NamedVolumeTarget(const std::string& volume, const std::string& uid = kPod1) {
    EXPECT_TRUE(CreateVolume(volume, 1 << 20).ok());
    return MakeTarget(uid, volume);
  }
  std::string DataDir(const std::string& volume) { return GetVolume(volume).attributes().at("path"); }
};

TEST_F(FlexMountTest, MountTwiceGivesOneMountAndWritesReachTheVolume) {
  std::string target = NamedVolumeTarget("pv-a");
  Options opts = MountOptions(kPod1, "pv-a", {{"volume", "pv-a"}});
  FlexResult r = Mount(target, opts);
  ASSERT_TRUE(HasStatus(r, "Success"));
  EXPECT_TRUE(IsMountPoint(target));
  ASSERT_EQ(WriteFile(target + "/hello", "hi"), 0);
  EXPECT_EQ(ReadAll(DataDir("pv-a") + "/hello"), "hi");

  // Bind mounts on the same filesystem escape kubelet's mount-point check:
  // the driver is called again and must not stack a second mount.
  r = Mount(target, opts, Capture::kSeparate);
  EXPECT_TRUE(HasStatus(r, "Success"));
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(MountsBelow(target), 1);
}

TEST_F(FlexMountTest, ReadOnlyIsEnforcedByTheKernel) {
  std::string target = NamedVolumeTarget("pv-ro");
  ASSERT_EQ(WriteFile(DataDir("pv-ro") + "/existing", "x"), 0);
  FlexResult r = Mount(target, MountOptions(kPod1, "pv-ro", {{"volume", "pv-ro"}, {"kubernetes.io/readwrite", "ro"}}));
  ASSERT_TRUE(HasStatus(r, "Success"));
  ASSERT_TRUE(IsMountPoint(target));
  EXPECT_EQ(WriteFile(target + "/new", "x"), EROFS);
  EXPECT_EQ(WriteFile(target + "/existing", "y"), EROFS);
  EXPECT_EQ(::mkdir((target + "/d").c_str(), 0755), -1);
  EXPECT_EQ(errno, EROFS);
  EXPECT_EQ(ReadAll(target + "/existing"), "x");
}

TEST_F(FlexMountTest, MountOptionsBecomeKernelMountFlags) {
  std::string target = NamedVolumeTarget("pv-flags");
  FlexResult r = Mount(target, MountOptions(kPod1, "pv-flags", {{"volume", "pv-flags"}, {"mountOptions", "nosuid,nodev,noexec"}}));
  ASSERT_TRUE(HasStatus(r, "Success"));
  MountTable table;
  ASSERT_TRUE(table.Load().ok());
  const MountEntry* e = table.FindTarget(target);
  ASSERT_NE(e, nullptr);
  std::string opts = "," + e->options + ",";
  for (const char* flag : {",nosuid,", ",nodev,", ",noexec,"}) EXPECT_NE(opts.find(flag), std::string::npos) << e->options;

  std::string other = MakeTarget(kPod2, "pv-flags");
  r = Mount(other, MountOptions(kPod2, "pv-flags", {{"volume", "pv-flags"}, {"mountOptions", "nosuid,rbind"}}));
  EXPECT_TRUE(HasStatus(r, "Failure"));
  EXPECT_NE(r.message().find("rbind"), std::string::npos) << Describe(r);
  EXPECT_FALSE(IsMountPoint(other));
}

TEST_F(FlexMountTest, PodUidMustMatchTheTarget) {
  // The driver forwards kubelet's pod identity; the daemon checks it.
  std::string target = NamedVolumeTarget("pv-uid");
  FlexResult r = Mount(target, MountOptions(kPod1, "pv-uid", {{"volume", "pv-uid"}, {"kubernetes.io/pod.uid", kPod2}}));
  EXPECT_TRUE(HasStatus(r, "Failure"));
  EXPECT_FALSE(IsMountPoint(target));
}

TEST_F(FlexMountTest, UnmountLeavesAForeignMountAlone) {
  std::string target = MakeTarget(kPod1, "foreign");
  std::string elsewhere = root_ + "/foreign";
  fs::create_directories(elsewhere);
  ASSERT_EQ(::mount(elsewhere.c_str(), target.c_str(), nullptr, MS_BIND, nullptr), 0);
  FlexResult r = Unmount(target);
  EXPECT_TRUE(HasStatus(r, "Failure"));
  EXPECT_TRUE(IsMountPoint(target));
}

TEST_F(FlexMountTest, BadReadWriteValueFailsAndMountsNothing) {
  std::string target = NamedVolumeTarget("pv-rx");
  FlexResult r = Mount(target, MountOptions(kPod1, "pv-rx", {{"volume", "pv-rx"}, {"kubernetes.io/readwrite", "rx"}}));
  EXPECT_TRUE(HasStatus(r, "Failure"));
  EXPECT_EQ(MountsBelow(pods_root_), 0);
}

TEST_F(FlexMountTest, EmptyFsTypeAndNoFsGroupLeaveTheRootGroupAlone) {
  std::string target = NamedVolumeTarget("pv-plain");
  Options opts = MountOptions(kPod1, "pv-plain", {{"volume", "pv-plain"}});
  ASSERT_EQ(opts.at("kubernetes.io/fsType"), "");
  ASSERT_EQ(opts.count("kubernetes.io/mounterArgs.FsGroup"), 0u);
  ASSERT_TRUE(HasStatus(Mount(target, opts), "Success"));
  struct stat st {};
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_TRUE(IsMountPoint(target));
  EXPECT_EQ(st.st_gid, 0u);  // a spurious fs_group=0 would also set setgid
  EXPECT_EQ(st.st_mode & S_ISGID, 0u);
}

TEST_F(FlexMountTest, FsGroupSetsTheVolumeRootGroup) {
  std::string target = NamedVolumeTarget("pv-fsg");
  FlexResult r =
      Mount(target, MountOptions(kPod1, "pv-fsg", {{"volume", "pv-fsg"}, {"kubernetes.io/mounterArgs.FsGroup", "4321"}}));
  ASSERT_TRUE(HasStatus(r, "Success"));
  struct stat st {};
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, 4321u);
  EXPECT_NE(st.st_mode & S_ISGID, 0u);
}

TEST_F(FlexMountTest, NonNumericFsGroupFailsAndMountsNothing) {
  std::string target = NamedVolumeTarget("pv-fsg-bad");
  FlexResult r = Mount(
      target, MountOptions(kPod1, "pv-fsg-bad", {{"volume", "pv-fsg-bad"}, {"kubernetes.io/mounterArgs.FsGroup", "wheel"}}));
  EXPECT_TRUE(HasStatus(r, "Failure"));
  EXPECT_FALSE(IsMountPoint(target));
}

TEST_F(FlexMountTest, UnknownKeysAreTolerated) {
  std::string target = NamedVolumeTarget("pv-extra");
  FlexResult r = Mount(target, MountOptions(kPod1, "pv-extra",
                                            {{"volume", "pv-extra"},
                                             {"kubernetes.io/someFutureKey", "1"},
                                             {"k8s.io/other", "2"},
                                             {"storageTier", "gold"},
                                             {"mdoe", "0700"}}));
  EXPECT_TRUE(HasStatus(r, "Success"));
  EXPECT_TRUE(IsMountPoint(target));
}

TEST_F(FlexMountTest, EscapedCharactersInValuesAreDecoded) {
  std::string target = NamedVolumeTarget("pv-esc");
  Options opts = MountOptions(kPod1, "pv-esc", {{"volume", "pv-esc"}, {"kubernetes.io/pod.name", "a<b>&c"}});
  std::string json = KubeletJson(opts);
  ASSERT_NE(json.find("a\\u003cb\\u003e\\u0026c"), std::string::npos) << json;
  FlexResult r = Flex({"mount", target, json});
  ASSERT_TRUE(HasStatus(r, "Success"));
  EXPECT_TRUE(IsMountPoint(target));
  // The daemon's publication record holds the pod name the driver sent:
  // decoded, not the escape sequence.
  int records = 0;
  for (const auto& e : fs::directory_iterator(state_dir_ + "/publications")) {
    if (e.path().extension() != ".json") continue;
    ++records;
    nlohmann::json rec = nlohmann::json::parse(ReadAll(e.path()));
    EXPECT_EQ(rec["pod"]["name"], "a<b>&c") << rec.dump();
    EXPECT_EQ(rec["pod"]["uid"], kPod1) << rec.dump();
  }
  EXPECT_EQ(records, 1);
}

// base64 of "s3cr3t-Value!"
constexpr char kSecretPlain[] = "s3cr3t-Value!";
constexpr char kSecretB64[] = "czNjcjN0LVZhbHVlIQ==";

void ExpectNoSecret(const std::string& text, const std::string& where) {
  EXPECT_EQ(text.find(kSecretPlain), std::string::npos) << where << ": " << text;
  EXPECT_EQ(text.find(kSecretB64), std::string::npos) << where << ": " << text;
}

TEST_F(FlexMountTest, SecretIsAcceptedAndNeverEchoed) {
  std::string target = NamedVolumeTarget("pv-sec");
  Options secret = {{"kubernetes.io/secret/password", kSecretB64}};
  Options opts = MountOptions(kPod1, "pv-sec", {{"volume", "pv-sec"}});
  opts.insert(secret.begin(), secret.end());
  FlexResult r = Mount(target, opts);
  ASSERT_TRUE(HasStatus(r, "Success"));
  EXPECT_TRUE(IsMountPoint(target));
  ExpectNoSecret(r.output, "mount output");

  // Failures are where drivers tend to dump their input.
  std::string other = MakeTarget(kPod2, "pv-none");
  Options bad = MountOptions(kPod2, "pv-none", {{"volume", "pv-none"}});
  bad.insert(secret.begin(), secret.end());
  r = Mount(other, bad);
  EXPECT_TRUE(HasStatus(r, "Failure"));
  ExpectNoSecret(r.output, "failed mount output");
  bad["kubernetes.io/mounterArgs.FsGroup"] = "not-a-gid";
  r = Mount(other, bad);
  EXPECT_TRUE(HasStatus(r, "Failure"));
  ExpectNoSecret(r.output, "failed option parsing output");
  std::string broken = KubeletJson(bad);
  broken.insert(broken.find(kSecretB64) + std::strlen(kSecretB64) + 1, " x");  // a syntax error right after it
  r = Flex({"mount", other, broken});
  EXPECT_TRUE(HasStatus(r, "Failure"));
  ExpectNoSecret(r.output, "JSON syntax error output");
  ExpectNoSecret(ReadAll(log_path_), "nodevold log");
}

TEST_F(FlexMountTest, MissingVolumeOptionFailsAndLeavesTheTargetAsItWas) {
  std::string target = MakeTarget(kPod1, "pv-missing");
  struct stat before {}, after {};
  ASSERT_EQ(::stat(target.c_str(), &before), 0);
  FlexResult r = Mount(target, MountOptions(kPod1, "pv-missing", {}));
  EXPECT_TRUE(HasStatus(r, "Failure"));
  EXPECT_NE(r.message().find("volume"), std::string::npos) << Describe(r);
  EXPECT_EQ(MountsBelow(pods_root_), 0);
  ASSERT_EQ(::stat(target.c_str(), &after), 0) << "target removed";
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(after.st_mode, before.st_mode);
  EXPECT_EQ(after.st_gid, before.st_gid);
  EXPECT_TRUE(fs::is_empty(target));
  EXPECT_TRUE(ListVolumes().empty());
}

TEST_F(FlexMountTest, UnknownVolumeFailsNamingIt) {
  std::string target = MakeTarget(kPod1, "pv-ghost");
  FlexResult r = Mount(target, MountOptions(kPod1, "pv-ghost", {{"volume", "pv-ghost"}}), Capture::kSeparate);
  EXPECT_TRUE(HasStatus(r, "Failure"));
  EXPECT_NE(r.message().find("pv-ghost"), std::string::npos) << Describe(r);
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(MountsBelow(pods_root_), 0);
}

TEST_F(FlexMountTest, TargetOutsideThePodsRootFailsAndMountsNothing) {
  ASSERT_TRUE(CreateVolume("pv-out", 1 << 20).ok());
  std::string outside = root_ + "/elsewhere/" + kPod1 + "/volumes/nodevol.io~volume/pv-out";
  fs::create_directories(outside);
  FlexResult r = Mount(outside, MountOptions(kPod1, "pv-out", {{"volume", "pv-out"}}));
  EXPECT_TRUE(HasStatus(r, "Failure"));
  // A symlink from inside the pods root to outside it is the same thing.
  std::string link = MakeTarget(kPod2, "pv-out", false);
  fs::create_directory_symlink(outside, link);
  r = Mount(link, MountOptions(kPod2, "pv-out", {{"volume", "pv-out"}}));
  EXPECT_TRUE(HasStatus(r, "Failure"));
  EXPECT_EQ(MountsBelow(root_), 0);
}

TEST_F(FlexMountTest, UnmountIsIdempotentAndKubeletsRmdirSucceeds) {
  std::string target = NamedVolumeTarget("pv-u");
  ASSERT_TRUE(HasStatus(Mount(target, MountOptions(kPod1, "pv-u", {{"volume", "pv-u"}})), "Success"));
  ASSERT_EQ(WriteFile(target + "/keep", "data"), 0);
  ASSERT_TRUE(IsMountPoint(target));

  FlexResult r = Unmount(target, Capture::kSeparate);
  EXPECT_TRUE(HasStatus(r, "Success"));
  EXPECT_EQ(r.err, "");
  EXPECT_FALSE(IsMountPoint(target));
  EXPECT_TRUE(HasStatus(Unmount(target), "Success"));  // again
  EXPECT_EQ(::rmdir(target.c_str()), 0) << "kubelet's rmdir after unmount: " << std::strerror(errno);
  EXPECT_TRUE(HasStatus(Unmount(target), "Success"));  // the dir is gone now

  // A named volume outlives its publications, data included.
  grpc::Status st;
  v1::Volume v = GetVolume("pv-u", &st);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(v.published_at_size(), 0);
  EXPECT_EQ(ReadAll(DataDir("pv-u") + "/keep"), "data");
}

TEST_F(FlexMountTest, UnmountOfMissingDirectoriesSucceeds) {
  EXPECT_TRUE(HasStatus(Unmount(MakeTarget(kPod1, "never-made", false)), "Success"));
  EXPECT_TRUE(HasStatus(Unmount(pods_root_ + "/" + kPod2 + "/volumes/nodevol.io~volume/x"), "Success"));
}

TEST_F(FlexMountTest, TwentyParallelMountsThenTwentyParallelUnmounts) {
  // 5 volumes, each in 4 pods: different targets, some sharing a volume, as
  // kubelet runs them concurrently across pods.
  constexpr int kN = 20;
  for (int v = 0; v < 5; ++v) ASSERT_TRUE(CreateVolume("pv-par-" + std::to_string(v), 1 << 20).ok());
  std::vector<std::string> targets, uids;
  for (int i = 0; i < kN; ++i) {
    char uid[40];
    std::snprintf(uid, sizeof uid, "00000000-0000-4000-8000-%012d", i);
    uids.push_back(uid);
    targets.push_back(MakeTarget(uid, "data"));
  }
  auto run_all = [&](bool mount) {
    std::vector<FlexResult> results(kN);
    std::vector<std::thread> threads;
    for (int i = 0; i < kN; ++i)
      threads.emplace_back([&, i] {
        std::string vol = "pv-par-" + std::to_string(i % 5);
        results[i] = mount ? Mount(targets[i], MountOptions(uids[i], "data", {{"volume", vol}})) : Unmount(targets[i]);
      });
    for (auto& t : threads) t.join();
    for (int i = 0; i < kN; ++i) EXPECT_TRUE(HasStatus(results[i], "Success")) << targets[i];
  };
  run_all(true);
  EXPECT_EQ(MountsBelow(pods_root_), kN);
  for (const v1::Volume& v : ListVolumes()) EXPECT_EQ(v.published_at_size(), 4) << v.name();
  run_all(false);
  EXPECT_EQ(MountsBelow(pods_root_), 0);
  for (const v1::Volume& v : ListVolumes()) EXPECT_EQ(v.published_at_size(), 0) << v.name();
}

}  // namespace
}  // namespace nodevol::testing
