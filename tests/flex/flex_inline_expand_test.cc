// Inline ephemeral volumes (created by mount, deleted by unmount) and
// expandfs, checked through the daemon's own view of its volumes.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "flex_fixture.h"

namespace nodevol::testing {
namespace {

namespace fs = std::filesystem;

class FlexInlineTest : public FlexTest {
 protected:
  bool Listed(const std::string& name) {
    auto vols = ListVolumes();
    return std::any_of(vols.begin(), vols.end(), [&](const v1::Volume& v) { return v.name() == name; });
  }
};

TEST_F(FlexInlineTest, InlineVolumeLivesExactlyAsLongAsItsMount) {
  std::string target = MakeTarget(kPod1, "scratch");
  const std::string name = "ephemeral-" + kPod1 + "-scratch";
  FlexResult r = Mount(target, MountOptions(kPod1, "scratch", {{"pool", "default"}, {"size", "10Mi"}}));
  ASSERT_TRUE(HasStatus(r, "Success"));
  ASSERT_TRUE(IsMountPoint(target));

  grpc::Status st;
  v1::Volume v = GetVolume(name, &st);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_TRUE(v.ephemeral());
  EXPECT_EQ(v.pool(), "default");
  EXPECT_EQ(v.size_bytes(), 10u << 20);
  ASSERT_EQ(v.published_at_size(), 1);
  EXPECT_EQ(v.published_at(0), target);
  EXPECT_TRUE(Listed(name));

  std::ofstream(target + "/scratch-file") << "tmp";
  std::string data = v.attributes().at("path");
  EXPECT_EQ(ReadAll(data + "/scratch-file"), "tmp");

  ASSERT_TRUE(HasStatus(Unmount(target), "Success"));
  EXPECT_FALSE(IsMountPoint(target));
  GetVolume(name, &st);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND) << st.error_message();
  EXPECT_FALSE(Listed(name));
  EXPECT_FALSE(fs::exists(data)) << "the ephemeral volume's data outlived it";
  EXPECT_EQ(::rmdir(target.c_str()), 0);
}

TEST_F(FlexInlineTest, RepeatedMountReusesTheVolumeAndPodsVolumesAreSeparate) {
  std::string a = MakeTarget(kPod1, "cache"), b = MakeTarget(kPod1, "tmp");
  Options inline_opts = {{"pool", "default"}, {"size", "1Mi"}};
  ASSERT_TRUE(HasStatus(Mount(a, MountOptions(kPod1, "cache", inline_opts)), "Success"));
  std::ofstream(a + "/f") << "kept";
  ASSERT_TRUE(HasStatus(Mount(a, MountOptions(kPod1, "cache", inline_opts)), "Success"));
  EXPECT_EQ(ReadAll(a + "/f"), "kept") << "a repeated mount must not recreate the volume";
  ASSERT_TRUE(HasStatus(Mount(b, MountOptions(kPod1, "tmp", inline_opts)), "Success"));
  EXPECT_EQ(MountsBelow(pods_root_), 2);
  EXPECT_EQ(ListVolumes().size(), 2u);
  EXPECT_FALSE(fs::exists(b + "/f"));
  ASSERT_TRUE(HasStatus(Unmount(a), "Success"));
  EXPECT_TRUE(HasStatus(Unmount(a), "Success"));
  EXPECT_FALSE(Listed("ephemeral-" + kPod1 + "-cache"));
  EXPECT_TRUE(Listed("ephemeral-" + kPod1 + "-tmp"));
  EXPECT_TRUE(IsMountPoint(b));
}

TEST_F(FlexInlineTest, SizeFormsAndBackendParameters) {
  // Small sizes: a dir pool admits a volume against its filesystem's free
  // space, and a test machine's /tmp may have only a few GB free.
  struct Case {
    std::string dir, size;
    uint64_t bytes;
  } cases[] = {{"plain", "3145728", 3145728ULL}, {"decimal", "5M", 5000000ULL}, {"binary", "7Mi", 7ULL << 20}};
  for (const Case& c : cases) {
    std::string target = MakeTarget(kPod1, c.dir);
    FlexResult r = Mount(target, MountOptions(kPod1, c.dir, {{"pool", "default"}, {"size", c.size}, {"mode", "0750"}}));
    ASSERT_TRUE(HasStatus(r, "Success")) << c.size;
    grpc::Status st;
    v1::Volume v = GetVolume("ephemeral-" + kPod1 + "-" + c.dir, &st);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(v.size_bytes(), c.bytes) << c.size;
    EXPECT_EQ(v.parameters().count("mode"), 1u) << "backend parameter not passed on";
    EXPECT_EQ(fs::status(target).permissions(), fs::perms(0750)) << c.size;
  }
}

TEST_F(FlexInlineTest, KubeletKeysAndSecretsAreNotBackendParameters) {
  // An inline spec passes unknown user keys to the backend, which rejects
  // them: kubelet's own keys (secret, FsGroup, future ones) must not go there.
  std::string target = MakeTarget(kPod1, "scratch");
  FlexResult r = Mount(target, MountOptions(kPod1, "scratch",
                                            {{"pool", "default"},
                                             {"size", "1Mi"},
                                             {"kubernetes.io/secret/token", "dG9rZW4="},
                                             {"kubernetes.io/mounterArgs.FsGroup", "2000"},
                                             {"kubernetes.io/someFutureKey", "x"},
                                             {"k8s.io/other", "y"}}));
  ASSERT_TRUE(HasStatus(r, "Success"));
  v1::Volume v = GetVolume("ephemeral-" + kPod1 + "-scratch");
  EXPECT_EQ(v.parameters_size(), 0) << v.DebugString();
}

TEST_F(FlexInlineTest, MisspeltParameterFailsNamingItAndLeavesNothing) {
  std::string target = MakeTarget(kPod1, "scratch");
  FlexResult r = Mount(target, MountOptions(kPod1, "scratch", {{"pool", "default"}, {"size", "1Mi"}, {"mdoe", "0700"}}));
  EXPECT_TRUE(HasStatus(r, "Failure"));
  EXPECT_NE(r.message().find("mdoe"), std::string::npos) << Describe(r);
  EXPECT_TRUE(ListVolumes().empty());
  EXPECT_EQ(MountsBelow(pods_root_), 0);
  EXPECT_TRUE(fs::is_empty(pool_dir_)) << "a volume directory was left in the pool";
}

TEST_F(FlexInlineTest, MissingOrBadSizeFailsAndLeavesNothing) {
  std::string target = MakeTarget(kPod1, "scratch");
  for (const Options& bad : {Options{{"pool", "default"}}, Options{{"pool", "default"}, {"size", "lots"}},
                             Options{{"pool", "default"}, {"size", "0"}}, Options{{"pool", "nosuch"}, {"size", "1Mi"}}}) {
    FlexResult r = Mount(target, MountOptions(kPod1, "scratch", bad));
    EXPECT_TRUE(HasStatus(r, "Failure")) << KubeletJson(bad);
  }
  EXPECT_TRUE(ListVolumes().empty());
  EXPECT_EQ(MountsBelow(pods_root_), 0);
}

class FlexExpandTest : public FlexTest {
 protected:
  void SetUp() override {
    FlexTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_TRUE(CreateVolume("pv-x", 1 << 20).ok());
    target_ = MakeTarget(kPod1, "pv-x");
    opts_ = MountOptions(kPod1, "pv-x", {{"volume", "pv-x"}});
    ASSERT_TRUE(HasStatus(Mount(target_, opts_), "Success"));
  }
  // kubelet's call for attach=false: devicePath "", deviceMountPath = the
  // pod's target dir; its JSON has no pod keys.
  FlexResult ExpandFs(uint64_t new_bytes, uint64_t old_bytes) {
    Options o = {{"kubernetes.io/fsType", ""}, {"kubernetes.io/pvOrVolumeName", "pv-x"},
                 {"kubernetes.io/readwrite", "rw"}, {"volume", "pv-x"}};
    return Flex({"expandfs", KubeletJson(o), "", target_, std::to_string(new_bytes), std::to_string(old_bytes)}, {},
                Capture::kSeparate);
  }
  uint64_t Size() { return GetVolume("pv-x").size_bytes(); }
  std::string target_;
  Options opts_;
};

TEST_F(FlexExpandTest, GrowsTheVolumeAndIsIdempotent) {
  FlexResult r = ExpandFs(4 << 20, 1 << 20);
  ASSERT_TRUE(HasStatus(r, "Success"));
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(Size(), 4u << 20);
  EXPECT_TRUE(HasStatus(ExpandFs(4 << 20, 1 << 20), "Success"));  // kubelet retries
  EXPECT_EQ(Size(), 4u << 20);
  EXPECT_TRUE(HasStatus(ExpandFs(2 << 20, 1 << 20), "Success"));  // already big enough
  EXPECT_EQ(Size(), 4u << 20);
  EXPECT_TRUE(IsMountPoint(target_));
}

TEST_F(FlexExpandTest, BadInputFails) {
  Options o = {{"kubernetes.io/pvOrVolumeName", "pv-none"}, {"volume", "pv-none"}};
  FlexResult r = Flex({"expandfs", KubeletJson(o), "", target_, "4194304", "1048576"});
  EXPECT_TRUE(HasStatus(r, "Failure"));
  EXPECT_NE(r.message().find("pv-none"), std::string::npos) << Describe(r);
  Options good = {{"volume", "pv-x"}};
  EXPECT_TRUE(HasStatus(Flex({"expandfs", KubeletJson(good), "", target_, "4MiB", "1048576"}), "Failure"));
  EXPECT_TRUE(HasStatus(Flex({"expandfs", KubeletJson(good), "", target_, "-1", "1048576"}), "Failure"));
  EXPECT_EQ(Size(), 1u << 20);
}

}  // namespace
}  // namespace nodevol::testing
