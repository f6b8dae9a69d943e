// csi::Registrar (mountd/csi/registrar.h) with a test standing in for
// kubelet's plugin watcher over the real registration socket: what
// GetInfo answers, and that every way a registration can fail ends with
// a new socket (a new attempt for kubelet, which never retries one),
// while a success keeps the socket. Plus csi::IdentityService.
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/version.h"
#include "csi/driver.h"
#include "csi/identity_service.h"
#include "csi/registrar.h"
#include "pluginregistration/v1/api.grpc.pb.h"

namespace nodevol::csi {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class RegistrarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/csi-reg-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    opts_.socket = dir_ + "/nodevol.io-reg.sock";
    opts_.endpoint = "/var/lib/kubelet/plugins/nodevol.io/csi.sock";
    opts_.driver = kDriverName;
    // Long enough for GetInfo then Notify from the test on a loaded
    // machine (300 ms made AFailureReportGetsANewSocket flake in CI);
    // NoReportAfterGetInfoGetsANewSocket shortens it.
    opts_.notify_timeout = 2s;
    opts_.initial_backoff = 50ms;
    opts_.max_backoff = 200ms;
    opts_.check_every = 20ms;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // What kubelet's plugin watcher does with a new socket: dial, GetInfo.
  std::unique_ptr<::pluginregistration::Registration::Stub> Dial() {
    return ::pluginregistration::Registration::NewStub(
        grpc::CreateChannel("unix:" + opts_.socket, grpc::InsecureChannelCredentials()));
  }
  ::pluginregistration::PluginInfo GetInfo() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    ::pluginregistration::InfoRequest req;
    ::pluginregistration::PluginInfo info;
    grpc::Status st = Dial()->GetInfo(&ctx, req, &info);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return info;
  }
  void Notify(bool ok, const std::string& error = "") {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    ::pluginregistration::RegistrationStatus req;
    req.set_plugin_registered(ok);
    req.set_error(error);
    ::pluginregistration::RegistrationStatusResponse resp;
    grpc::Status st = Dial()->NotifyRegistrationStatus(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
  }
  ino_t Inode() const {
    struct stat st;
    return ::lstat(opts_.socket.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) ? st.st_ino : 0;
  }
  // Waits until the registrar has offered `n` sockets in all.
  bool WaitSockets(const Registrar& r, int n) {
    for (int i = 0; i < 1000; ++i) {  // 10 s: CI runs tests side by side
      if (r.state().sockets >= n && Inode() != 0) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

  std::string dir_;
  Registrar::Options opts_;
};

TEST_F(RegistrarTest, GetInfoNamesTheDriverAndItsEndpointOnARootOnlySocket) {
  Registrar r(opts_);
  ASSERT_TRUE(r.Start().ok());
  struct stat st;
  ASSERT_EQ(::lstat(opts_.socket.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto info = GetInfo();
  EXPECT_EQ(info.type(), "CSIPlugin");
  EXPECT_EQ(info.name(), "nodevol.io");
  EXPECT_EQ(info.endpoint(), opts_.endpoint);
  ASSERT_EQ(info.supported_versions_size(), 1);
  EXPECT_EQ(info.supported_versions(0), "1.0.0");
  Notify(true);
  EXPECT_TRUE(r.state().registered);
  r.Stop();
  EXPECT_EQ(Inode(), 0u) << "the socket stayed after Stop: kubelet would keep the driver registered";
}

TEST_F(RegistrarTest, ASuccessKeepsTheSocket) {
  Registrar r(opts_);
  ASSERT_TRUE(r.Start().ok());
  ino_t first = Inode();
  GetInfo();
  Notify(true);
  std::this_thread::sleep_for(opts_.notify_timeout + 200ms);
  EXPECT_EQ(Inode(), first);
  EXPECT_EQ(r.state().sockets, 1);
  EXPECT_TRUE(r.state().registered);
}

TEST_F(RegistrarTest, AFailureReportGetsANewSocket) {
  Registrar r(opts_);
  ASSERT_TRUE(r.Start().ok());
  GetInfo();
  Notify(false, "error updating CSINode: connection refused");
  ASSERT_TRUE(WaitSockets(r, 2)) << "no new socket after kubelet's failure";
  EXPECT_FALSE(r.state().registered);
  EXPECT_NE(r.state().last_error.find("connection refused"), std::string::npos) << r.state().last_error;
  // The new socket serves: kubelet's next attempt succeeds.
  EXPECT_EQ(GetInfo().name(), "nodevol.io");
  Notify(true);
  EXPECT_TRUE(r.state().registered);
}

TEST_F(RegistrarTest, NoReportAfterGetInfoGetsANewSocket) {
  opts_.notify_timeout = 300ms;
  Registrar r(opts_);
  ASSERT_TRUE(r.Start().ok());
  GetInfo();  // and kubelet never reports (its RegisterPlugin hung or failed silently)
  ASSERT_TRUE(WaitSockets(r, 2));
  EXPECT_NE(r.state().last_error.find("no registration status"), std::string::npos) << r.state().last_error;
}

TEST_F(RegistrarTest, ARemovedOrReplacedSocketIsMadeAgain) {
  Registrar r(opts_);
  ASSERT_TRUE(r.Start().ok());
  GetInfo();
  Notify(true);
  ASSERT_EQ(::unlink(opts_.socket.c_str()), 0);
  ASSERT_TRUE(WaitSockets(r, 2)) << "a removed socket was not re-created";
  EXPECT_EQ(GetInfo().endpoint(), opts_.endpoint);
}

// issue 58 item 10: the registrar removed another process's live socket
// at its path, and kept taking the path back.
TEST_F(RegistrarTest, AnotherProcesssLiveSocketIsLeftAlone) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  struct sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, opts_.socket.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof addr), 0) << strerror(errno);
  ASSERT_EQ(::listen(fd, 4), 0);
  ino_t theirs = Inode();
  ASSERT_NE(theirs, 0u);
  Registrar r(opts_);
  Status st = r.Start();
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.ToString();
  EXPECT_EQ(Inode(), theirs) << "the live socket was taken";
  ::close(fd);
  // Nobody listens now: a stale socket, which a start removes and replaces.
  ASSERT_TRUE(r.Start().ok());
  EXPECT_EQ(GetInfo().endpoint(), opts_.endpoint) << "the registrar does not serve the path it took back";
  r.Stop();
}

TEST_F(RegistrarTest, ARegularFileInTheWayIsAnErrorAndLeftAlone) {
  { std::ofstream(opts_.socket) << "not a socket"; }
  Registrar r(opts_);
  Status st = r.Start();
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.ToString();
  EXPECT_TRUE(fs::is_regular_file(opts_.socket));
}

TEST(IdentityService, NamesTheDriverAndAnswersProbeFromTheDaemon) {
  bool ready = false;
  IdentityService s(
      [&](std::string* why) {
        *why = "starting";
        return ready;
      },
      /*controller=*/true);
  grpc::ServerContext ctx;
  ::csi::v1::GetPluginInfoResponse info;
  ASSERT_TRUE(s.GetPluginInfo(&ctx, nullptr, &info).ok());
  EXPECT_EQ(info.name(), "nodevol.io");
  EXPECT_EQ(info.vendor_version(), Version());
  ::csi::v1::GetPluginCapabilitiesResponse caps;
  ASSERT_TRUE(s.GetPluginCapabilities(&ctx, nullptr, &caps).ok());
  ASSERT_EQ(caps.capabilities_size(), 3);
  EXPECT_EQ(caps.capabilities(0).service().type(),
            ::csi::v1::PluginCapability::Service::VOLUME_ACCESSIBILITY_CONSTRAINTS);
  EXPECT_EQ(caps.capabilities(1).service().type(), ::csi::v1::PluginCapability::Service::CONTROLLER_SERVICE);
  EXPECT_EQ(caps.capabilities(2).volume_expansion().type(), ::csi::v1::PluginCapability::VolumeExpansion::ONLINE);
  // The node socket's: no controller there (csi_controller_test.cc).
  IdentityService node([](std::string*) { return true; }, /*controller=*/false);
  ::csi::v1::GetPluginCapabilitiesResponse node_caps;
  ASSERT_TRUE(node.GetPluginCapabilities(&ctx, nullptr, &node_caps).ok());
  ASSERT_EQ(node_caps.capabilities_size(), 2);
  EXPECT_EQ(node_caps.capabilities(1).volume_expansion().type(), ::csi::v1::PluginCapability::VolumeExpansion::ONLINE);
  ::csi::v1::ProbeResponse probe;
  ASSERT_TRUE(s.Probe(&ctx, nullptr, &probe).ok());
  EXPECT_FALSE(probe.ready().value());
  ready = true;
  ASSERT_TRUE(s.Probe(&ctx, nullptr, &probe).ok());
  EXPECT_TRUE(probe.ready().value());
}

}  // namespace
}  // namespace nodevol::csi
