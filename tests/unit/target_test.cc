#include "mount/target.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace nodevol {
namespace {

namespace fs = std::filesystem;

class TargetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nodevol-target-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    fs::create_directories(base_ + "/pods/uid-1/volumes/nodevol.io~volume/data");
    fs::create_directories(base_ + "/outside/x");
    ASSERT_TRUE(ResolveConfiguredDir("pods", base_ + "/pods", &root_).ok());
  }
  void TearDown() override { fs::remove_all(base_); }
  std::string Vol(const std::string& rest = "") { return root_ + "/uid-1/volumes/nodevol.io~volume" + rest; }

  std::string base_, root_;
};

TEST_F(TargetTest, AcceptsTheKubeletForm) {
  Target t;
  ASSERT_TRUE(ResolveTarget(root_, Vol("/data"), &t).ok());
  EXPECT_EQ(t.path, Vol("/data"));
  EXPECT_EQ(t.pod_uid, "uid-1");
  EXPECT_EQ(t.plugin, "nodevol.io~volume");
  EXPECT_EQ(t.name, "data");
  EXPECT_TRUE(t.exists);
}

TEST_F(TargetTest, MissingLeafIsFineWhenTheParentExists) {
  Target t;
  ASSERT_TRUE(ResolveTarget(root_, Vol("/new"), &t).ok());
  EXPECT_FALSE(t.exists);
  EXPECT_EQ(ResolveTarget(root_, root_ + "/uid-2/volumes/nodevol.io~volume/x", &t).code(),
            Status::Code::kInvalidArgument);
  EXPECT_TRUE(ResolveTarget(root_, root_ + "/uid-2/volumes/nodevol.io~volume/x", &t, true).ok());
  EXPECT_FALSE(t.exists);
}

TEST_F(TargetTest, RejectsLexicalTricks) {
  Target t;
  for (const std::string& bad :
       {std::string(""), std::string("relative/path"), Vol("/../data"), Vol("/./data"), Vol("//data"),
        Vol("/data/.."), Vol("/da") + std::string("\0ta", 3),
        root_ + "/uid-1/volumes/data", root_ + "/uid-1/data/nodevol.io~volume/x",
        root_ + "/uid-1/volumes/nodevol.io~volume", Vol("/data/deeper"), root_ + "/uid-1/volumes/novendor/x",
        root_ + "/uid-1/volumes/~x/y", base_ + "/outside/x", std::string("/etc")}) {
    EXPECT_EQ(ResolveTarget(root_, bad, &t).code(), Status::Code::kInvalidArgument) << "accepted: " << bad;
  }
}

TEST_F(TargetTest, RejectsSymlinksLeadingOut) {
  fs::create_directory_symlink(base_ + "/outside/x", Vol("/evil"));
  Target t;
  Status st = ResolveTarget(root_, Vol("/evil"), &t);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("outside the pods root"), std::string::npos) << st.message();

  // A symlinked pod directory pointing out of the root.
  fs::create_directories(base_ + "/outside/volumes/nodevol.io~volume/d");
  fs::create_directory_symlink(base_ + "/outside", root_ + "/uid-2");
  EXPECT_EQ(ResolveTarget(root_, root_ + "/uid-2/volumes/nodevol.io~volume/d", &t).code(),
            Status::Code::kInvalidArgument);
}

TEST_F(TargetTest, SymlinkWithinTheRootIsJudgedByWhereItLeads) {
  // A symlink to another valid target resolves to that target.
  fs::create_directories(root_ + "/uid-3/volumes/nodevol.io~volume/real");
  fs::create_directory_symlink(root_ + "/uid-3/volumes/nodevol.io~volume/real", Vol("/alias"));
  Target t;
  ASSERT_TRUE(ResolveTarget(root_, Vol("/alias"), &t).ok());
  EXPECT_EQ(t.path, root_ + "/uid-3/volumes/nodevol.io~volume/real");
  // A symlink to a non-target place inside the root is refused.
  fs::create_directory_symlink(root_ + "/uid-1", Vol("/up"));
  EXPECT_EQ(ResolveTarget(root_, Vol("/up"), &t).code(), Status::Code::kInvalidArgument);
}

TEST_F(TargetTest, AcceptsKubeletsCsiForm) {
  // kubelet makes <pv>; the driver makes (and removes) "mount" in it.
  std::string pv = root_ + "/uid-1/volumes/kubernetes.io~csi/pv-1";
  fs::create_directories(pv);
  Target t;
  ASSERT_TRUE(ResolveTarget(root_, pv + "/mount", &t).ok());
  EXPECT_EQ(t.path, pv + "/mount");
  EXPECT_EQ(t.pod_uid, "uid-1");
  EXPECT_EQ(t.plugin, "kubernetes.io~csi");
  EXPECT_EQ(t.name, "pv-1");
  EXPECT_EQ(t.leaf, "mount");
  EXPECT_FALSE(t.exists);
  fs::create_directory(pv + "/mount");
  ASSERT_TRUE(ResolveTarget(root_, pv + "/mount", &t).ok());
  EXPECT_TRUE(t.exists);
  // The FlexVolume form has no leaf.
  ASSERT_TRUE(ResolveTarget(root_, Vol("/data"), &t).ok());
  EXPECT_EQ(t.leaf, "");
}

TEST_F(TargetTest, RejectsOtherCsiShapes) {
  std::string csi = root_ + "/uid-1/volumes/kubernetes.io~csi";
  fs::create_directories(csi + "/pv-1/mount");
  fs::create_directories(root_ + "/uid-1/volumes/other~csi/pv-1");
  Target t;
  for (const std::string& bad : {csi + "/pv-1",                 // kubelet's directory itself
                                 csi + "/pv-1/mount/deeper",    // inside a mount
                                 csi + "/pv-1/..",              // lexical tricks
                                 csi + "/pv-1/mount/..",
                                 root_ + "/uid-1/volumes/other~csi/pv-1/mount",  // five components elsewhere
                                 csi + "/pv-1/bad name"}) {
    EXPECT_EQ(ResolveTarget(root_, bad, &t).code(), Status::Code::kInvalidArgument) << "accepted: " << bad;
  }
  // A leaf that is a symlink leading out is judged by where it leads.
  fs::create_directory_symlink(base_ + "/outside/x", csi + "/pv-1/evil");
  EXPECT_EQ(ResolveTarget(root_, csi + "/pv-1/evil", &t).code(), Status::Code::kInvalidArgument);
  // A missing parent (the pod is gone): refused, unless unpublishing.
  EXPECT_EQ(ResolveTarget(root_, csi + "/pv-2/mount", &t).code(), Status::Code::kInvalidArgument);
  EXPECT_TRUE(ResolveTarget(root_, csi + "/pv-2/mount", &t, true).ok());
  EXPECT_FALSE(t.exists);
}

// issue 58 item 4: a secret's or an emptyDir's directory, and another CSI
// driver's PV directory, were accepted (a publish over the secret
// directory hid the service-account token until unpublish).
TEST_F(TargetTest, OnlyNodevolsOwnPluginDirectories) {
  Target t;
  for (const char* plugin : {"kubernetes.io~secret", "kubernetes.io~empty-dir", "other.io~volume"}) {
    std::string dir = root_ + "/uid-1/volumes/" + plugin + "/token";
    fs::create_directories(dir);
    EXPECT_EQ(ResolveTarget(root_, dir, &t).code(), Status::Code::kInvalidArgument) << "accepted: " << dir;
  }
  std::string pv = root_ + "/uid-1/volumes/kubernetes.io~csi/pv-other";
  fs::create_directories(pv + "/mount");
  std::ofstream(pv + "/vol_data.json") << R"({"driverName":"ebs.csi.aws.com","volumeHandle":"vol-1"})";
  Status st = ResolveTarget(root_, pv + "/mount", &t);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.message();
  std::ofstream(pv + "/vol_data.json", std::ios::trunc) << R"({"driverName":"nodevol.io","volumeHandle":"pv-1"})";
  EXPECT_TRUE(ResolveTarget(root_, pv + "/mount", &t).ok());
}

TEST_F(TargetTest, RawBlockTargetsAreFilesBelowKubeletsPublishDir) {
  std::string publish = base_ + "/kubelet/plugins/kubernetes.io/csi/volumeDevices/publish";
  fs::create_directories(publish + "/pv-1");
  std::string root;
  ASSERT_TRUE(ResolveConfiguredDir("publish", publish, &root).ok());
  Target t;
  ASSERT_TRUE(ResolveBlockTarget(root, root + "/pv-1/pod-uid-1", &t).ok());
  EXPECT_TRUE(t.block);
  EXPECT_FALSE(t.exists);
  EXPECT_EQ(t.name, "pv-1");
  EXPECT_EQ(t.pod_uid, "pod-uid-1");
  { std::ofstream(root + "/pv-1/pod-uid-1") << ""; }
  ASSERT_TRUE(ResolveBlockTarget(root, root + "/pv-1/pod-uid-1", &t).ok());
  EXPECT_TRUE(t.exists);
  fs::create_directories(root + "/pv-1/dir");
  fs::create_directories(root + "/pv-1/sub");
  fs::create_symlink("/etc/passwd", root + "/pv-1/link");
  for (const std::string& bad : {root + "/pv-1",              // kubelet's directory
                                 root + "/pv-1/dir",          // not a file
                                 root + "/pv-1/link",         // a symlink is never followed
                                 root + "/pv-1/sub/deeper",   // too deep
                                 root + "/pv-1/../pv-1/x",    // lexical tricks
                                 root + "/pv-2/x",            // no directory from kubelet
                                 Vol("/data"),                // a pod volume directory
                                 std::string("/dev/sda")}) {
    EXPECT_EQ(ResolveBlockTarget(root, bad, &t).code(), Status::Code::kInvalidArgument) << "accepted: " << bad;
  }
  // A directory symlinked out of the publish dir: judged by where it leads.
  fs::create_directory_symlink(base_ + "/outside", root + "/pv-3");
  EXPECT_EQ(ResolveBlockTarget(root, root + "/pv-3/x", &t).code(), Status::Code::kInvalidArgument);
  // Unpublish after kubelet removed its directory.
  EXPECT_TRUE(ResolveBlockTarget(root, root + "/pv-9/x", &t, true).ok());
  EXPECT_FALSE(t.exists);
}

TEST_F(TargetTest, ARegularFileIsNotATarget) {
  fs::remove(Vol("/data"));
  { std::ofstream(Vol("/data")) << "x"; }
  Target t;
  EXPECT_EQ(ResolveTarget(root_, Vol("/data"), &t).code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace nodevol
