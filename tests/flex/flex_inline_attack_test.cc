// A pod author as attacker: what an inline flexVolume can ask for, through
// the driver as kubelet runs it and straight at the socket, against the
// real daemon. Every attempt fails with a message that says why, and leaves
// no volume, no directory and no mount behind (docs/security.md).
#include <filesystem>

#include "flex_fixture.h"

namespace nodevol::testing {
namespace {

namespace fs = std::filesystem;

class FlexInlineAttackTest : public FlexTest {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    closed_ = root_ + "/closed";
    small_ = root_ + "/small";
    fs::create_directories(closed_);
    fs::create_directories(small_);
    // "default" (the fixture's) allows inline volumes; "closed" says
    // nothing, so refuses them; "small" allows them up to 4 MiB.
    StartDaemon({"--pool=name=closed,backend=dir,path=" + closed_,
                 "--pool=name=small,backend=dir,path=" + small_ + ",inline=on,inline-max-size=4Mi"});
  }

  // The mount failed, its message has `want`, and nothing was made.
  void ExpectRefused(const FlexResult& r, const std::string& want, size_t volumes_before = 0) {
    EXPECT_TRUE(HasStatus(r, "Failure"));
    EXPECT_NE(r.message().find(want), std::string::npos) << Describe(r);
    EXPECT_EQ(ListVolumes().size(), volumes_before);
    EXPECT_EQ(MountsBelow(pods_root_), 0);
    EXPECT_TRUE(fs::is_empty(closed_) && fs::is_empty(small_));
  }

  std::string closed_, small_;
};

TEST_F(FlexInlineAttackTest, PoolsRefuseInlineVolumesUnlessTheOperatorAllowsThem) {
  std::string t = MakeTarget(kPod1, "scratch");
  ExpectRefused(Mount(t, MountOptions(kPod1, "scratch", {{"pool", "closed"}, {"size", "1Mi"}})),
                "does not allow inline volumes");
  ASSERT_TRUE(HasStatus(Mount(t, MountOptions(kPod1, "scratch", {{"pool", "small"}, {"size", "4Mi"}})), "Success"));
  EXPECT_TRUE(HasStatus(Unmount(t), "Success"));
}

TEST_F(FlexInlineAttackTest, SizeAboveThePoolsInlineMaximumIsRefused) {
  std::string t = MakeTarget(kPod1, "scratch");
  ExpectRefused(Mount(t, MountOptions(kPod1, "scratch", {{"pool", "small"}, {"size", "5Mi"}})), "inline-max-size");
  // The whole volume group, say: refused the same way on every pool kind.
  ExpectRefused(Mount(t, MountOptions(kPod1, "scratch", {{"pool", "small"}, {"size", "1Ti"}})), "inline-max-size");
}

TEST_F(FlexInlineAttackTest, BackendParametersAreRefused) {
  // The vectors: the whole export, another tenant's directory, a
  // server of the attacker's own, the volume root's owner, claim identity
  // (which path patterns render), the deletion policy.
  const Options attacks[] = {
      {{"share", "/"}},
      {{"pathPattern", "victim-ns-data-pvc-1"}},
      {{"subDir", "victim-ns-data-pvc-1"}},
      {{"server", "attacker.example"}, {"share", "/x"}},
      {{"uid", "0"}},
      {{"nodevol.io/pvc-namespace", "victim"}},
      {{"nodevol.io/pv-name", "pvc-1"}},
      {{"onDelete", "delete"}},
  };
  std::string t = MakeTarget(kPod1, "scratch");
  for (const Options& a : attacks) {
    Options o = {{"pool", "default"}, {"size", "1Mi"}};
    o.insert(a.begin(), a.end());
    FlexResult r = Mount(t, MountOptions(kPod1, "scratch", o));
    ExpectRefused(r, "inline volumes take only size, fsType and mode");
    EXPECT_NE(r.message().find(a.begin()->first), std::string::npos) << "the key at fault is named: " << Describe(r);
  }
  EXPECT_TRUE(fs::is_empty(pool_dir_));
}

TEST_F(FlexInlineAttackTest, SuidAndDevMountOptionsAreRefused) {
  std::string t = MakeTarget(kPod1, "scratch");
  for (const char* opts : {"suid", "dev", "nosuid,suid", "exec,dev"})
    ExpectRefused(Mount(t, MountOptions(kPod1, "scratch", {{"pool", "default"}, {"size", "1Mi"}, {"mountOptions", opts}})),
                  "is not supported for bind mounts");
  EXPECT_TRUE(fs::is_empty(pool_dir_));
}

// The same parameters sent straight to the socket, as any client could:
// the rule lives in nodevold, not only in the driver.
TEST_F(FlexInlineAttackTest, TheDaemonRefusesBackendParametersWithoutTheDriver) {
  std::string t = MakeTarget(kPod1, "scratch");
  // Values a backend would take: uid and gid are valid dir parameters.
  for (auto [key, value] : std::initializer_list<std::pair<const char*, const char*>>{
           {"uid", "0"}, {"gid", "0"}, {"share", "/"}, {"server", "10.0.0.1"}, {"mountOptions", "suid"},
           {"pathPattern", "x"}}) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::PublishRequest req;
    req.set_target(t);
    req.mutable_inline_()->set_pool("default");
    req.mutable_inline_()->set_size_bytes(1 << 20);
    (*req.mutable_inline_()->mutable_parameters())[key] = value;
    v1::PublishResponse resp;
    grpc::Status st = stub()->Publish(&ctx, req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << key << ": " << st.error_message();
    EXPECT_NE(st.error_message().find(key), std::string::npos) << st.error_message();
    EXPECT_NE(st.error_message().find("inline volumes take only size, fsType and mode"), std::string::npos)
        << st.error_message();
  }
  EXPECT_TRUE(ListVolumes().empty());
  EXPECT_EQ(MountsBelow(pods_root_), 0);
}

// `volume:` written inline by a pod author looks to the driver exactly like
// a PV's: kubelet's pvOrVolumeName is then the pod's own volume name, which
// the author picks. The pod's namespace is what kubelet alone sets.
TEST_F(FlexInlineAttackTest, NamedVolumesGoOnlyIntoPodsOfTheirClaimsNamespace) {
  ASSERT_TRUE(CreateVolume("pvc-victim", 1 << 20, "default", "victim-ns").ok());
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    v1::CreateVolumeRequest req;  // made by hand, no claim namespace
    req.set_name("handmade");
    req.set_pool("default");
    req.set_size_bytes(1 << 20);
    v1::CreateVolumeResponse resp;
    ASSERT_TRUE(stub()->CreateVolume(&ctx, req, &resp).ok());
  }
  // The pod names its volume like the victim's PV, so even
  // kubernetes.io/pvOrVolumeName matches.
  std::string t = MakeTarget(kPod1, "pvc-victim");
  ExpectRefused(Mount(t, MountOptions(kPod1, "pvc-victim", {{"volume", "pvc-victim"}})),
                "belongs to a claim of another namespace than default", 2);
  std::string h = MakeTarget(kPod1, "handmade");
  ExpectRefused(Mount(h, MountOptions(kPod1, "handmade", {{"volume", "handmade"}})),
                "records no claim namespace", 2);
  EXPECT_EQ(Mount(t, MountOptions(kPod1, "pvc-victim", {{"volume", "pvc-victim"}})).message().find("victim-ns"),
            std::string::npos)
      << "the other namespace is not named in the pod's events";

  // The victim's own namespace may, and so may the operator (no pod).
  Options own = MountOptions(kPod2, "pvc-victim", {{"volume", "pvc-victim"}});
  own["kubernetes.io/pod.namespace"] = "victim-ns";
  std::string v = MakeTarget(kPod2, "pvc-victim");
  ASSERT_TRUE(HasStatus(Mount(v, own), "Success"));
  EXPECT_TRUE(HasStatus(Unmount(v), "Success"));
  EXPECT_TRUE(Publish("handmade", h).ok());
  EXPECT_TRUE(Unpublish(h).ok());
}

TEST_F(FlexInlineAttackTest, AnotherPodsInlineVolumeCannotBeNamed) {
  std::string mine = MakeTarget(kPod1, "scratch");
  ASSERT_TRUE(HasStatus(Mount(mine, MountOptions(kPod1, "scratch", {{"pool", "default"}, {"size", "1Mi"}})), "Success"));
  std::string theirs = MakeTarget(kPod2, "grab");
  FlexResult r = Mount(theirs, MountOptions(kPod2, "grab", {{"volume", "ephemeral-" + kPod1 + "-scratch"}}));
  EXPECT_TRUE(HasStatus(r, "Failure"));
  EXPECT_NE(r.message().find("another pod's inline volume"), std::string::npos) << Describe(r);
  EXPECT_FALSE(IsMountPoint(theirs));
  EXPECT_TRUE(HasStatus(Unmount(mine), "Success"));
}

}  // namespace
}  // namespace nodevol::testing
