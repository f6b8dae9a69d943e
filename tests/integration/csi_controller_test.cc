// nodevold's local csi.v1.Controller (issue 58 item 11): it makes and
// deletes volumes, so it is never on the node socket kubelet dials (which
// whatever is given the node plugin's socket can also reach); only with
// --csi-controller=on, on controller.sock beside it, root only.
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <filesystem>

#include "csi/v1/csi.grpc.pb.h"
#include "daemon_fixture.h"

namespace nodevol::testing {
namespace {

namespace fs = std::filesystem;
using Capability = ::csi::v1::PluginCapability::Service;

class CsiControllerTest : public DaemonFixture {
 protected:
  std::string Socket(const std::string& name) { return root_ + "/plugins/nodevol.io/" + name; }
  std::shared_ptr<grpc::Channel> Dial(const std::string& name) {
    return grpc::CreateChannel("unix:" + Socket(name), grpc::InsecureChannelCredentials());
  }

  grpc::Status Create(const std::shared_ptr<grpc::Channel>& ch, const std::string& name) {
    grpc::ClientContext c;
    c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    ::csi::v1::CreateVolumeRequest r;
    r.set_name(name);
    (*r.mutable_parameters())["pool"] = "default";
    r.mutable_capacity_range()->set_required_bytes(16 << 20);
    auto* cap = r.add_volume_capabilities();
    cap->mutable_mount();
    cap->mutable_access_mode()->set_mode(::csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
    ::csi::v1::CreateVolumeResponse resp;
    return ::csi::v1::Controller::NewStub(ch)->CreateVolume(&c, r, &resp);
  }

  bool OffersController(const std::shared_ptr<grpc::Channel>& ch) {
    grpc::ClientContext c;
    ::csi::v1::GetPluginCapabilitiesResponse resp;
    EXPECT_TRUE(::csi::v1::Identity::NewStub(ch)->GetPluginCapabilities(&c, {}, &resp).ok());
    for (const auto& cap : resp.capabilities())
      if (cap.has_service() && cap.service().type() == Capability::CONTROLLER_SERVICE) return true;
    return false;
  }
};

TEST_F(CsiControllerTest, TheNodeSocketMakesNoVolumes) {
  StartDaemon();
  auto node = Dial("csi.sock");
  grpc::Status st = Create(node, "pv-1");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNIMPLEMENTED) << st.error_message();
  EXPECT_FALSE(OffersController(node)) << "no controller, yet the node socket says there is one";
  EXPECT_FALSE(fs::exists(Socket("controller.sock")));
  EXPECT_TRUE(ListVolumes().empty());
}

// The volume grows, not only the answer (issue 68 item 6: an expand that
// answered the size asked and grew nothing passed csi-sanity and every
// test). What growing does to an LV and its filesystem is the domain's
// ExpandVolume, which vm_lvm_thin and vm_lvm_thick check.
TEST_F(CsiControllerTest, ExpandGrowsTheVolumeAndNeverShrinksIt) {
  StartDaemon({"--csi-controller=on"});
  auto controller = Dial("controller.sock");
  ASSERT_TRUE(Create(controller, "pv-1").ok());
  auto expand = [&](const std::string& id, int64_t bytes, ::csi::v1::ControllerExpandVolumeResponse* resp) {
    grpc::ClientContext c;
    SetDeadline(&c);
    ::csi::v1::ControllerExpandVolumeRequest r;
    r.set_volume_id(id);
    r.mutable_capacity_range()->set_required_bytes(bytes);
    return ::csi::v1::Controller::NewStub(controller)->ControllerExpandVolume(&c, r, resp);
  };
  ::csi::v1::ControllerExpandVolumeResponse resp;
  grpc::Status st = expand("pv-1", 48 << 20, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(resp.capacity_bytes(), 48 << 20);
  EXPECT_FALSE(resp.node_expansion_required());
  EXPECT_EQ(GetVolume("pv-1").size_bytes(), 48ull << 20) << "ControllerExpandVolume answered the size and grew nothing";
  ASSERT_TRUE(expand("pv-1", 32 << 20, &resp).ok());
  EXPECT_EQ(resp.capacity_bytes(), 48 << 20) << "a smaller size is a success that shrinks nothing";
  EXPECT_EQ(GetVolume("pv-1").size_bytes(), 48ull << 20);
  EXPECT_EQ(expand("pv-1", -1, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(expand("pv-none", 64 << 20, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(GetVolume("pv-1").size_bytes(), 48ull << 20) << "a refused expand changed the volume";
  EXPECT_EQ(ListVolumes().size(), 1u);
}

TEST_F(CsiControllerTest, ControllerOnlyOnItsOwnRootOnlySocket) {
  StartDaemon({"--csi-controller=on"});
  struct stat sb;
  ASSERT_EQ(::lstat(Socket("controller.sock").c_str(), &sb), 0);
  EXPECT_TRUE(S_ISSOCK(sb.st_mode));
  EXPECT_EQ(sb.st_mode & 07777, 0600u);
  EXPECT_EQ(sb.st_uid, 0u);

  auto controller = Dial("controller.sock");
  EXPECT_TRUE(OffersController(controller));
  grpc::Status st = Create(controller, "pv-1");
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(ListVolumes().size(), 1u);

  // Still none on the node socket, and no Node service on the controller's.
  // (The node socket's Identity reports the plugin's CONTROLLER_SERVICE:
  // csi-sanity asks it there.)
  auto node = Dial("csi.sock");
  EXPECT_EQ(Create(node, "pv-2").error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_TRUE(OffersController(node));
  grpc::ClientContext c;
  ::csi::v1::NodeGetInfoResponse info;
  EXPECT_EQ(::csi::v1::Node::NewStub(controller)->NodeGetInfo(&c, {}, &info).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(ListVolumes().size(), 1u);

  EXPECT_EQ(StopDaemon(), 0);
  EXPECT_FALSE(fs::exists(Socket("controller.sock"))) << "a clean stop removes the socket";
}

}  // namespace
}  // namespace nodevol::testing
