// The CSI front door of a real nodevold (csi.v1.Node on <kubelet
// root>/plugins/nodevol.io/csi.sock), with what csi-sanity does not ask:
// kubelet's own paths, pod identity from podInfoOnMount, inline volumes,
// fsGroup handed over as volume_mount_group, and refusals that change
// nothing.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "csi/v1/csi.grpc.pb.h"
#include "daemon_fixture.h"

namespace nodevol::testing {
namespace {

namespace fs = std::filesystem;
using ::csi::v1::NodePublishVolumeRequest;

// kubelet's id of an inline volume: "csi-" and a hex SHA-256.
const std::string kInlineId = "csi-9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

class CsiNodeTest : public DaemonFixture {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // The pool on a tmpfs of its own, with totals nothing else here has
    // (StatsAreThoseOfThePublishedVolume); TearDown unmounts it.
    ASSERT_EQ(::mount("tmpfs", pool_dir_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=128m,nr_inodes=4096,mode=0755"),
              0)
        << std::strerror(errno);
    StartDaemon();
    // --pods-root <root>/pods: the kubelet root is <root>.
    std::string sock = root_ + "/plugins/nodevol.io/csi.sock";
    node_ = ::csi::v1::Node::NewStub(grpc::CreateChannel("unix:" + sock, grpc::InsecureChannelCredentials()));
  }

  // kubelet's volume directory of a CSI volume in a pod; the driver's
  // target is <it>/mount.
  std::string PodDir(const std::string& uid, const std::string& pv) {
    std::string d = pods_root_ + "/" + uid + "/volumes/kubernetes.io~csi/" + pv;
    fs::create_directories(d);
    return d;
  }

  NodePublishVolumeRequest Request(const std::string& volume, const std::string& target, const std::string& ns) {
    NodePublishVolumeRequest r;
    r.set_volume_id(volume);
    r.set_target_path(target);
    r.mutable_volume_capability()->mutable_mount();
    r.mutable_volume_capability()->mutable_access_mode()->set_mode(
        ::csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
    auto& ctx = *r.mutable_volume_context();
    ctx["pool"] = "default";
    ctx["csi.storage.k8s.io/pod.namespace"] = ns;
    ctx["csi.storage.k8s.io/pod.name"] = "app";
    ctx["csi.storage.k8s.io/ephemeral"] = "false";
    return r;
  }

  grpc::Status Publish(const NodePublishVolumeRequest& r) {
    grpc::ClientContext c;
    c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    ::csi::v1::NodePublishVolumeResponse resp;
    return node_->NodePublishVolume(&c, r, &resp);
  }

  grpc::Status Unpublish(const std::string& volume, const std::string& target) {
    grpc::ClientContext c;
    ::csi::v1::NodeUnpublishVolumeRequest r;
    r.set_volume_id(volume);
    r.set_target_path(target);
    ::csi::v1::NodeUnpublishVolumeResponse resp;
    return node_->NodeUnpublishVolume(&c, r, &resp);
  }

  // A volume the provisioner would make for a claim in namespace `ns`.
  void MakeVolume(const std::string& name, const std::string& ns) {
    grpc::ClientContext c;
    v1::CreateVolumeRequest r;
    r.set_name(name);
    r.set_pool("default");
    r.set_size_bytes(64 << 20);
    (*r.mutable_parameters())["nodevol.io/pvc-namespace"] = ns;
    v1::CreateVolumeResponse resp;
    ASSERT_TRUE(stub()->CreateVolume(&c, r, &resp).ok());
  }

  std::unique_ptr<::csi::v1::Node::Stub> node_;
};

TEST_F(CsiNodeTest, PublishesAtKubeletsPathAndRemovesWhatItMade) {
  MakeVolume("pv-a", "team");
  std::string dir = PodDir("pod-1", "pv-a");
  std::string target = dir + "/mount";
  ASSERT_TRUE(Publish(Request("pv-a", target, "team")).ok());
  EXPECT_TRUE(IsMountPoint(target));
  std::ofstream(target + "/hello") << "from the pod";
  // Again: the same answer, nothing more mounted (kubelet retries).
  ASSERT_TRUE(Publish(Request("pv-a", target, "team")).ok());
  EXPECT_EQ(MountsBelow(dir), 1);

  ASSERT_TRUE(Unpublish("pv-a", target).ok());
  EXPECT_FALSE(IsMountPoint(target));
  EXPECT_FALSE(fs::exists(target)) << "the driver removes the target it made";
  EXPECT_TRUE(fs::exists(dir)) << "kubelet's directory is kubelet's";
  ASSERT_TRUE(Unpublish("pv-a", target).ok()) << "idempotent";
  // The data stays with the volume.
  std::string again = PodDir("pod-2", "pv-a") + "/mount";
  ASSERT_TRUE(Publish(Request("pv-a", again, "team")).ok());
  std::string text;
  {
    std::ifstream in(again + "/hello");
    std::getline(in, text);
  }
  EXPECT_EQ(text, "from the pod");
  ASSERT_TRUE(Unpublish("pv-a", again).ok());
}

TEST_F(CsiNodeTest, RefusesTargetsKubeletNeverGivesAndChangesNothing) {
  MakeVolume("pv-b", "team");
  std::string dir = PodDir("pod-1", "pv-b");
  fs::create_directories(root_ + "/elsewhere");
  for (const std::string& bad : {dir,                                     // kubelet's own directory
                                 root_ + "/elsewhere/mount",              // outside the pods root
                                 pods_root_ + "/pod-1/volumes/x~y/pv-b/mount",  // another plugin's
                                 dir + "/../pv-b/mount"}) {
    grpc::Status st = Publish(Request("pv-b", bad, "team"));
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad << ": " << st.error_message();
  }
  EXPECT_FALSE(fs::exists(root_ + "/elsewhere/mount"));
  EXPECT_EQ(MountsBelow(root_), MountsBelow(pool_dir_)) << "a mount besides the pool's tmpfs";
  // A symlink where the target goes, leading out: judged by where it leads.
  fs::create_directory_symlink(root_ + "/elsewhere", dir + "/mount");
  EXPECT_EQ(Publish(Request("pv-b", dir + "/mount", "team")).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(MountsBelow(root_), MountsBelow(pool_dir_)) << "a mount besides the pool's tmpfs";
}

// issue 58 item 3: with kubelet's root behind a symlink, Publish resolved
// the path and Unpublish compared it literally: a raw block target, or a
// filesystem target whose directory kubelet had already removed, was
// INVALID_ARGUMENT for ever, and kubelet's teardown never ended.
TEST_F(CsiNodeTest, UnpublishUnderASymlinkedKubeletRoot) {
  const std::string link = root_ + "-link";  // what kubelet's --root-dir names
  fs::create_directory_symlink(root_, link);
  MakeVolume("pv-l", "team");
  PodDir("uid-l", "pv-l");
  std::string via_link = link + "/pods/uid-l/volumes/kubernetes.io~csi/pv-l/mount";
  ASSERT_TRUE(Publish(Request("pv-l", via_link, "team")).ok());
  EXPECT_EQ(MountsBelow(pods_root_), 1);
  grpc::Status st = Unpublish("pv-l", via_link);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(MountsBelow(pods_root_), 0);
  // kubelet removed the pod's directories before its retry.
  fs::remove_all(pods_root_ + "/uid-l");
  st = Unpublish("pv-l", via_link);
  EXPECT_TRUE(st.ok()) << st.error_message();
  // A raw block target below the link (nothing published there).
  std::string block = link + "/plugins/kubernetes.io/csi/volumeDevices/publish/pv-l/uid-l";
  st = Unpublish("pv-l", block);
  EXPECT_TRUE(st.ok()) << st.error_message();
  fs::create_directories(root_ + "/plugins/kubernetes.io/csi/volumeDevices/publish/pv-l");
  st = Unpublish("pv-l", block);
  EXPECT_TRUE(st.ok()) << st.error_message();
  // Still refused: a path that leads outside kubelet's directories.
  fs::create_directory_symlink(root_ + "/elsewhere", link + "-out");
  st = Unpublish("pv-l", link + "-out/pods/uid-l/volumes/kubernetes.io~csi/pv-l/mount");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  fs::remove(link);
  fs::remove(link + "-out");
}

TEST_F(CsiNodeTest, APodOfAnotherNamespaceGetsNothing) {
  MakeVolume("pv-c", "team");
  std::string target = PodDir("pod-1", "pv-c") + "/mount";
  grpc::Status st = Publish(Request("pv-c", target, "intruder"));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  EXPECT_FALSE(fs::exists(target));
  EXPECT_EQ(MountsBelow(pods_root_), 0);
}

// issue 58 item 5: a CSIDriver without podInfoOnMount sends no pod, and
// the claim-namespace check was skipped: any pod got any claim's volume.
TEST_F(CsiNodeTest, NoPodIdentityNoClaimsVolume) {
  MakeVolume("pv-p", "team");
  std::string target = PodDir("pod-1", "pv-p") + "/mount";
  NodePublishVolumeRequest r = Request("pv-p", target, "team");
  for (const char* k : {"csi.storage.k8s.io/pod.namespace", "csi.storage.k8s.io/pod.name"})
    r.mutable_volume_context()->erase(k);
  grpc::Status st = Publish(r);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  EXPECT_NE(st.error_message().find("podInfoOnMount: true"), std::string::npos) << st.error_message();
  EXPECT_FALSE(fs::exists(target));
  EXPECT_EQ(MountsBelow(pods_root_), 0);
}

TEST_F(CsiNodeTest, InlineVolumeLivesAndDiesWithItsPublication) {
  std::string target = PodDir("pod-9", "scratch") + "/mount";
  NodePublishVolumeRequest r = Request(kInlineId, target, "team");
  auto& ctx = *r.mutable_volume_context();
  ctx["csi.storage.k8s.io/ephemeral"] = "true";
  ctx["size"] = "32Mi";
  ASSERT_TRUE(Publish(r).ok());
  EXPECT_TRUE(IsMountPoint(target));
  std::vector<v1::Volume> vols = ListVolumes();
  ASSERT_EQ(vols.size(), 1u);
  EXPECT_TRUE(vols[0].ephemeral());
  EXPECT_EQ(vols[0].size_bytes(), 32u << 20);
  ASSERT_TRUE(Unpublish(kInlineId, target).ok());
  EXPECT_TRUE(ListVolumes().empty()) << "an inline volume goes with its pod";

  // What a pod author may not ask for: refused, nothing made.
  ctx["path"] = "/etc";
  grpc::Status st = Publish(r);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  ctx.erase("path");
  ctx["size"] = "lots";
  EXPECT_EQ(Publish(r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(ListVolumes().empty());
  EXPECT_FALSE(fs::exists(target));
}

TEST_F(CsiNodeTest, VolumeMountGroupIsTheDomainsFsGroup) {
  MakeVolume("pv-d", "team");
  std::string target = PodDir("pod-1", "pv-d") + "/mount";
  NodePublishVolumeRequest r = Request("pv-d", target, "team");
  r.mutable_volume_capability()->mutable_mount()->set_volume_mount_group("4321");
  ASSERT_TRUE(Publish(r).ok());
  struct stat st;
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, 4321u);
  EXPECT_TRUE(st.st_mode & S_ISGID);
  ASSERT_TRUE(Unpublish("pv-d", target).ok());

  r.mutable_volume_capability()->mutable_mount()->set_volume_mount_group("wheel");
  EXPECT_EQ(Publish(r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(MountsBelow(pods_root_), 0);
}

// The figures are the volume's filesystem's, each in its place: the pool
// is on a tmpfs of its own (128 MiB, 4096 inodes), so nothing else here has
// those totals (the host's root filesystem, which a driver reporting the
// wrong path would show, has others), and 8 MiB written by the pod show as
// used, not as available (issue 68 item 6: totals > 0 was all it checked).
TEST_F(CsiNodeTest, StatsAreThoseOfThePublishedVolume) {
  MakeVolume("pv-e", "team");
  std::string target = PodDir("pod-1", "pv-e") + "/mount";
  ASSERT_TRUE(Publish(Request("pv-e", target, "team")).ok());
  auto stats = [&](::csi::v1::NodeGetVolumeStatsResponse* resp) {
    grpc::ClientContext c;
    SetDeadline(&c);
    ::csi::v1::NodeGetVolumeStatsRequest r;
    r.set_volume_id("pv-e");
    r.set_volume_path(target);
    return node_->NodeGetVolumeStats(&c, r, resp);
  };
  ::csi::v1::NodeGetVolumeStatsResponse before, resp;
  ASSERT_TRUE(stats(&before).ok());
  {
    std::ofstream out(target + "/data", std::ios::binary);
    std::string mib(1 << 20, 'x');
    for (int i = 0; i < 8; ++i) out << mib;
  }
  ASSERT_TRUE(stats(&resp).ok());
  ASSERT_EQ(resp.usage_size(), 2);
  const auto& bytes = resp.usage(0);
  const auto& inodes = resp.usage(1);
  EXPECT_EQ(bytes.unit(), ::csi::v1::VolumeUsage::BYTES);
  EXPECT_EQ(bytes.total(), 128 << 20);
  EXPECT_EQ(bytes.used() - before.usage(0).used(), 8 << 20) << "the pod's 8 MiB are not counted as used";
  EXPECT_EQ(bytes.available(), bytes.total() - bytes.used());
  EXPECT_EQ(inodes.unit(), ::csi::v1::VolumeUsage::INODES);
  EXPECT_EQ(inodes.total(), 4096);
  EXPECT_EQ(inodes.used() - before.usage(1).used(), 1) << "the pod's one file is not counted";
  EXPECT_EQ(inodes.available(), inodes.total() - inodes.used());
  struct statvfs root;
  ASSERT_EQ(::statvfs("/", &root), 0);
  EXPECT_NE(static_cast<uint64_t>(bytes.total()), root.f_blocks * root.f_frsize) << "the root filesystem's figures";
  ::csi::v1::NodeGetVolumeStatsRequest r;
  r.set_volume_id("pv-e");
  r.set_volume_path(target);
  // Another volume's id at this path: not found.
  MakeVolume("pv-f", "team");
  grpc::ClientContext c2;
  r.set_volume_id("pv-f");
  EXPECT_EQ(node_->NodeGetVolumeStats(&c2, r, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  // issue 58 item 9: an inline volume's kind of id at a claim's path
  // reported that claim's volume.
  grpc::ClientContext c3;
  r.set_volume_id(kInlineId);
  EXPECT_EQ(node_->NodeGetVolumeStats(&c3, r, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(Unpublish("pv-e", target).ok());
}

// issue 58 item 6: a repeat publish that asks for something else than the
// publication is (read-only over read-write, another group) was
// FAILED_PRECONDITION or OK with the difference ignored; the CSI spec says
// ALREADY_EXISTS, and the publication stays as it was. Other bind flags
// (a PV's mountOptions, which can be edited, sent again by kubelet after a
// restart) are applied to the publication instead: an ALREADY_EXISTS
// there would leave the pod's volume "uncertain" for good.
TEST_F(CsiNodeTest, ARepeatPublishAskingOtherwiseIsAlreadyExistsOrNewFlags) {
  MakeVolume("pv-r", "team");
  std::string target = PodDir("pod-1", "pv-r") + "/mount";
  NodePublishVolumeRequest r = Request("pv-r", target, "team");
  r.mutable_volume_capability()->mutable_mount()->set_volume_mount_group("4321");
  ASSERT_TRUE(Publish(r).ok());
  ASSERT_TRUE(Publish(r).ok()) << "the same again is a retry";
  const std::string before = MountOptions(target);

  NodePublishVolumeRequest ro = r;
  ro.set_readonly(true);
  NodePublishVolumeRequest group = r;
  group.mutable_volume_capability()->mutable_mount()->set_volume_mount_group("999");
  NodePublishVolumeRequest no_group = r;
  no_group.mutable_volume_capability()->mutable_mount()->clear_volume_mount_group();
  for (const auto* other : {&ro, &group, &no_group}) {
    grpc::Status st = Publish(*other);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::ALREADY_EXISTS) << st.error_message();
    EXPECT_NE(st.error_message().find("unpublish it first"), std::string::npos) << st.error_message();
  }
  EXPECT_EQ(MountOptions(target), before) << "a refused publish changed the mount";
  EXPECT_EQ(MountsBelow(pods_root_), 1);
  struct stat sb;
  ASSERT_EQ(::stat(target.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_gid, 4321u);

  // nosuid,nodev the pool adds are not the caller's to repeat.
  NodePublishVolumeRequest explicit_policy = r;
  explicit_policy.mutable_volume_capability()->mutable_mount()->add_mount_flags("nosuid");
  EXPECT_TRUE(Publish(explicit_policy).ok());
  EXPECT_EQ(MountOptions(target), before);

  NodePublishVolumeRequest noexec = r;
  noexec.mutable_volume_capability()->mutable_mount()->add_mount_flags("noexec");
  grpc::Status st = Publish(noexec);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_NE(MountOptions(target).find("noexec"), std::string::npos) << MountOptions(target);
  EXPECT_NE(MountOptions(target).find("nosuid"), std::string::npos) << "the pool's flags went";
  EXPECT_EQ(MountsBelow(pods_root_), 1) << "new flags are a remount, not a second bind";
  ASSERT_TRUE(Publish(r).ok());
  EXPECT_EQ(MountOptions(target).find("noexec"), std::string::npos) << MountOptions(target);
  // The record says so too: a restart keeps what was asked last.
  ASSERT_TRUE(Publish(noexec).ok());
  ASSERT_EQ(StopDaemon(), 0);
  StartDaemon();
  EXPECT_NE(MountOptions(target).find("noexec"), std::string::npos) << MountOptions(target);
  ASSERT_TRUE(Publish(noexec).ok());
  ASSERT_TRUE(Unpublish("pv-r", target).ok());
}

// A publication recorded without the pool's nosuid,nodev (written before
// they were the rule, or before allow-suid-dev changed) is the same
// publication to kubelet's retry, not ALREADY_EXISTS for ever.
TEST_F(CsiNodeTest, ARecordWithoutThePoolsFlagsIsStillTheSamePublication) {
  MakeVolume("pv-o", "team");
  std::string target = PodDir("pod-1", "pv-o") + "/mount";
  NodePublishVolumeRequest r = Request("pv-o", target, "team");
  ASSERT_TRUE(Publish(r).ok());
  ASSERT_EQ(StopDaemon(), 0);
  int edited = 0;
  for (const auto& e : fs::directory_iterator(state_dir_ + "/publications")) {
    std::ifstream in(e.path());
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (const std::string o : {"\"nosuid\"", "\"nodev\""})
      for (size_t at; (at = text.find(o)) != std::string::npos; ++edited) {
        size_t end = at + o.size();
        if (text[end] == ',') ++end;
        else if (text[at - 1] == ',') --at;
        text.erase(at, end - at);
      }
    std::ofstream(e.path(), std::ios::trunc) << text;
  }
  ASSERT_EQ(edited, 2) << "the record did not hold nosuid,nodev";
  StartDaemon();
  grpc::Status st = Publish(r);
  EXPECT_TRUE(st.ok()) << st.error_message();
  ASSERT_TRUE(Unpublish("pv-o", target).ok());
}

// issue 58 item 6: NodeUnpublishVolume ignored volume_id and removed
// whatever was published at the target.
TEST_F(CsiNodeTest, UnpublishRemovesOnlyTheVolumeItNames) {
  MakeVolume("pv-u", "team");
  MakeVolume("pv-w", "team");
  std::string target = PodDir("pod-1", "pv-u") + "/mount";
  ASSERT_TRUE(Publish(Request("pv-u", target, "team")).ok());
  for (const std::string& other : {std::string("pv-w"), std::string("pv-never"), kInlineId}) {
    grpc::Status st = Unpublish(other, target);
    // The CSI spec's answer for an id that names no volume is NOT_FOUND.
    EXPECT_EQ(st.error_code(), other == "pv-never" ? grpc::StatusCode::NOT_FOUND : grpc::StatusCode::FAILED_PRECONDITION)
        << other << ": " << st.error_message();
    EXPECT_TRUE(IsMountPoint(target)) << "unpublish of " << other << " removed pv-u";
  }
  EXPECT_EQ(GetVolume("pv-u").published_at_size(), 1);
  ASSERT_TRUE(Unpublish("pv-u", target).ok());
  EXPECT_FALSE(IsMountPoint(target));
  EXPECT_TRUE(Unpublish("pv-w", target).ok()) << "nothing there: idempotent, whatever the id";

  // An inline volume's publication goes with kubelet's id, not a claim's.
  std::string scratch = PodDir("pod-2", "scratch") + "/mount";
  NodePublishVolumeRequest r = Request(kInlineId, scratch, "team");
  (*r.mutable_volume_context())["csi.storage.k8s.io/ephemeral"] = "true";
  (*r.mutable_volume_context())["size"] = "16Mi";
  ASSERT_TRUE(Publish(r).ok());
  EXPECT_EQ(Unpublish("pv-u", scratch).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(IsMountPoint(scratch));
  ASSERT_TRUE(Unpublish(kInlineId, scratch).ok());
  EXPECT_FALSE(IsMountPoint(scratch));

  // A PV whose handle looks like kubelet's inline id is still the PV's.
  const std::string lookalike = "csi-" + std::string(64, 'b');
  MakeVolume(lookalike, "team");
  std::string t2 = PodDir("pod-3", lookalike) + "/mount";
  ASSERT_TRUE(Publish(Request(lookalike, t2, "team")).ok());
  grpc::Status la = Unpublish(lookalike, t2);
  EXPECT_TRUE(la.ok()) << la.error_message();
  EXPECT_FALSE(IsMountPoint(t2));

  // A bind of pv-u whose publication record was lost: only pv-u's
  // unpublish removes it.
  ASSERT_TRUE(Publish(Request("pv-u", target, "team")).ok());
  ASSERT_EQ(StopDaemon(), 0);
  for (const auto& e : fs::directory_iterator(state_dir_ + "/publications")) fs::remove(e.path());
  StartDaemon();
  grpc::Status st = Unpublish("pv-w", target);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  EXPECT_TRUE(IsMountPoint(target)) << "pv-w's unpublish removed an unrecorded bind of pv-u";
  st = Unpublish("pv-u", target);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_FALSE(IsMountPoint(target));
}

// issue 58 item 9: NodeExpandVolume took a negative size (answering
// capacity_bytes -1) and grew whatever the id named, wherever the path was.
TEST_F(CsiNodeTest, ExpandChecksTheSizeAndThePath) {
  MakeVolume("pv-x", "team");
  std::string target = PodDir("pod-1", "pv-x") + "/mount";
  ASSERT_TRUE(Publish(Request("pv-x", target, "team")).ok());
  auto expand = [&](const std::string& path, int64_t bytes, ::csi::v1::NodeExpandVolumeResponse* resp) {
    grpc::ClientContext c;
    ::csi::v1::NodeExpandVolumeRequest r;
    r.set_volume_id("pv-x");
    r.set_volume_path(path);
    r.mutable_capacity_range()->set_required_bytes(bytes);
    return node_->NodeExpandVolume(&c, r, resp);
  };
  ::csi::v1::NodeExpandVolumeResponse resp;
  EXPECT_EQ(expand(target, -1, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  std::string elsewhere = PodDir("pod-2", "pv-x") + "/mount";
  fs::create_directories(elsewhere);
  EXPECT_EQ(expand(elsewhere, 128 << 20, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(GetVolume("pv-x").size_bytes(), 64ull << 20) << "a refused expand changed the volume";
  grpc::Status st = expand(target, 128 << 20, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.capacity_bytes(), 128 << 20);
  // The volume grew, not only the answer (issue 68 item 6). What growing
  // does to an LV and its filesystem is the domain's ExpandVolume, which
  // vm_lvm_thin and vm_lvm_thick check through the Node API.
  EXPECT_EQ(GetVolume("pv-x").size_bytes(), 128ull << 20) << "NodeExpandVolume answered the size and grew nothing";
  // Smaller than it is: a success that shrinks nothing.
  ASSERT_TRUE(expand(target, 96 << 20, &resp).ok());
  EXPECT_EQ(resp.capacity_bytes(), 128 << 20);
  EXPECT_EQ(GetVolume("pv-x").size_bytes(), 128ull << 20);
  ASSERT_TRUE(Unpublish("pv-x", target).ok());
}

}  // namespace
}  // namespace nodevol::testing
