// The flex door (mountd/server/flex_door.h) of a real nodevold, as its
// client nodevol-flex uses it and as anyone else on the node might:
// answers equal to the Node API's, several requests on one connection,
// and hostile or broken input (other users, garbage, a 4 GiB length, no
// call, a connection flood) refused with a clear status, changing nothing
// and leaving the door serving.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "base/frame.h"
#include "base/unique_fd.h"
#include "daemon_fixture.h"
#include "nodevol/v1/flex_door.pb.h"

namespace nodevol::testing {
namespace {

class FlexDoorTest : public DaemonFixture {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    if (IsSkipped()) return;
    StartDaemon();
    door_ = socket_ + ".flex";
  }

  // A connection to the door (-1 on failure, errno kept).
  int Dial() {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", door_.c_str());
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      int err = errno;
      ::close(fd);
      errno = err;
      return -1;
    }
    struct timeval tv = {10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
  }

  // Sends raw bytes and reads one answer; false when none came.
  static bool RawCall(int fd, const std::string& bytes, v1::DoorResponse* resp) {
    if (::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(bytes.size())) return false;
    std::string answer;
    return ReadFrame(fd, kMaxFrame, &answer) == FrameResult::kOk && resp->ParseFromString(answer);
  }
  static std::string Framed(const std::string& payload) {
    auto n = static_cast<uint32_t>(payload.size());
    std::string out{static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                    static_cast<char>(n)};
    return out + payload;
  }
  static bool Call(int fd, const v1::DoorRequest& req, v1::DoorResponse* resp) {
    return RawCall(fd, Framed(req.SerializeAsString()), resp);
  }
  // True when the peer closed the connection (EOF) within 10 s.
  static bool Closed(int fd) {
    char c;
    return ::recv(fd, &c, 1, 0) == 0;
  }

  v1::DoorRequest PublishRequest(const std::string& volume, const std::string& target) {
    v1::DoorRequest req;
    req.set_timeout_ms(10000);
    req.mutable_publish()->set_volume(volume);
    req.mutable_publish()->set_target(target);
    return req;
  }

  // The door still serves: GetVolume of a missing volume gets NOT_FOUND.
  void ExpectServing() {
    UniqueFd fd(Dial());
    ASSERT_GE(fd.get(), 0) << std::strerror(errno);
    v1::DoorRequest req;
    req.mutable_get_volume()->set_name("no-such-volume");
    v1::DoorResponse resp;
    ASSERT_TRUE(Call(fd.get(), req, &resp));
    EXPECT_EQ(resp.code(), grpc::StatusCode::NOT_FOUND) << resp.message();
  }

  std::string door_;
};

TEST_F(FlexDoorTest, SocketIsRootOnlyBesideTheNodeApiSocket) {
  struct stat st;
  ASSERT_EQ(::stat(door_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, 0u);
}

TEST_F(FlexDoorTest, PublishAndUnpublishOnOneConnectionAsTheNodeApiWould) {
  ASSERT_TRUE(CreateVolume("pv-a", 1 << 20).ok());
  std::string target = MakeTarget("pod-1", "pv-a");
  UniqueFd fd(Dial());
  ASSERT_GE(fd.get(), 0);
  v1::DoorResponse resp;
  ASSERT_TRUE(Call(fd.get(), PublishRequest("pv-a", target), &resp));
  ASSERT_EQ(resp.code(), 0) << resp.message();
  EXPECT_EQ(resp.publish().volume(), "pv-a");
  EXPECT_TRUE(IsMountPoint(target));
  EXPECT_EQ(GetVolume("pv-a").published_at_size(), 1);

  // Again: idempotent, as the RPC is.
  ASSERT_TRUE(Call(fd.get(), PublishRequest("pv-a", target), &resp));
  EXPECT_EQ(resp.code(), 0) << resp.message();
  EXPECT_EQ(MountsBelow(target), 1);

  v1::DoorRequest un;
  un.mutable_unpublish()->set_target(target);
  ASSERT_TRUE(Call(fd.get(), un, &resp));
  ASSERT_EQ(resp.code(), 0) << resp.message();
  EXPECT_TRUE(resp.unpublish().was_published());
  EXPECT_FALSE(IsMountPoint(target));
  ASSERT_TRUE(Call(fd.get(), un, &resp));
  EXPECT_EQ(resp.code(), 0);
  EXPECT_FALSE(resp.unpublish().was_published());
}

TEST_F(FlexDoorTest, RefusalsCarryTheNodeApisCodeAndMessage) {
  ASSERT_TRUE(CreateVolume("pv-a", 1 << 20).ok());
  // A target outside kubelet's pods directory, through both doors.
  std::string outside = root_ + "/elsewhere";
  ::mkdir(outside.c_str(), 0755);
  grpc::Status via_grpc = Publish("pv-a", outside);
  ASSERT_FALSE(via_grpc.ok());
  UniqueFd fd(Dial());
  v1::DoorResponse resp;
  ASSERT_TRUE(Call(fd.get(), PublishRequest("pv-a", outside), &resp));
  EXPECT_EQ(resp.code(), via_grpc.error_code());
  EXPECT_EQ(resp.message(), via_grpc.error_message());
  EXPECT_FALSE(resp.has_publish());
  EXPECT_FALSE(IsMountPoint(outside));
  EXPECT_EQ(GetVolume("pv-a").published_at_size(), 0);
}

TEST_F(FlexDoorTest, OtherUsersCannotConnectAndAreRefusedIfTheModeIsLoosened) {
  // On a thread of its own whose credentials (raw syscalls: per thread,
  // unlike glibc's setuid) are nobody's: no fork of this threaded process.
  auto as_nobody = [&] {
    int result = -1;
    std::thread t([&] {
      if (::syscall(SYS_setresgid, 65534, 65534, 65534) != 0 || ::syscall(SYS_setresuid, 65534, 65534, 65534) != 0) {
        result = 10;
        return;
      }
      int fd = Dial();
      if (fd < 0) {
        result = errno == EACCES ? 20 : 21;
        return;
      }
      v1::DoorRequest req;
      req.mutable_get_volume()->set_name("x");
      v1::DoorResponse resp;
      result = !Call(fd, req, &resp) ? 30 : resp.code() == grpc::StatusCode::PERMISSION_DENIED ? 40 : 41;
      ::close(fd);
    });
    t.join();
    return result;
  };
  EXPECT_EQ(as_nobody(), 20) << "a non-root user connected to the 0600 socket";
  // Even if someone loosens the mode, only root is answered (SO_PEERCRED).
  ASSERT_EQ(::chmod(door_.c_str(), 0666), 0);
  ASSERT_EQ(::chmod(root_.c_str(), 0755), 0);
  EXPECT_EQ(as_nobody(), 40) << "a non-root peer was not refused with PERMISSION_DENIED";
  ExpectServing();
}

TEST_F(FlexDoorTest, GarbageIsRefusedAndTheDoorKeepsServing) {
  ASSERT_TRUE(CreateVolume("pv-a", 1 << 20).ok());
  {
    UniqueFd fd(Dial());
    v1::DoorResponse resp;
    ASSERT_TRUE(RawCall(fd.get(), Framed("\xff\xff\xff\xff garbage"), &resp));
    EXPECT_EQ(resp.code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(resp.message().find("DoorRequest"), std::string::npos) << resp.message();
    EXPECT_TRUE(Closed(fd.get()));
  }
  {
    // A length of 4 GiB - 1: refused from the header, nothing allocated.
    UniqueFd fd(Dial());
    v1::DoorResponse resp;
    ASSERT_TRUE(RawCall(fd.get(), std::string("\xff\xff\xff\xff", 4), &resp));
    EXPECT_EQ(resp.code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(resp.message().find("1 MiB"), std::string::npos) << resp.message();
    EXPECT_TRUE(Closed(fd.get()));
  }
  {
    // A request naming no call (what a newer driver's unknown call looks like).
    UniqueFd fd(Dial());
    v1::DoorRequest req;
    req.set_timeout_ms(1000);
    v1::DoorResponse resp;
    ASSERT_TRUE(Call(fd.get(), req, &resp));
    EXPECT_EQ(resp.code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(resp.message().find("names no call"), std::string::npos) << resp.message();
  }
  {
    // Half a frame, then gone.
    UniqueFd fd(Dial());
    std::string half = Framed(PublishRequest("pv-a", MakeTarget("pod-1", "pv-a")).SerializeAsString());
    half.resize(half.size() / 2);
    ASSERT_EQ(::send(fd.get(), half.data(), half.size(), MSG_NOSIGNAL), static_cast<ssize_t>(half.size()));
  }
  ExpectServing();
  EXPECT_EQ(GetVolume("pv-a").published_at_size(), 0);
  EXPECT_EQ(MountsBelow(pods_root_), 0);
}

TEST_F(FlexDoorTest, AFloodOfIdleConnectionsIsCappedAndDoesNotStopService) {
  // 64 served at once (FlexDoor::Options); the ones beyond are closed at
  // accept. Once the flood goes, calls are answered again.
  std::vector<int> flood;
  for (int i = 0; i < 80; ++i) {
    int fd = Dial();
    ASSERT_GE(fd, 0) << "connection " << i << ": " << std::strerror(errno);
    flood.push_back(fd);
  }
  int closed = 0;
  for (int i = 64; i < 80; ++i) closed += Closed(flood[i]);
  for (int fd : flood) ::close(fd);
  EXPECT_EQ(closed, 16) << "connections beyond the cap were not closed at accept";
  // The served ones end when their clients go; give the threads a moment.
  for (int i = 0; i < 50; ++i) {
    UniqueFd fd(Dial());
    v1::DoorRequest req;
    req.mutable_get_volume()->set_name("no-such-volume");
    v1::DoorResponse resp;
    if (fd.get() >= 0 && Call(fd.get(), req, &resp) && resp.code() == grpc::StatusCode::NOT_FOUND) return;
    ::usleep(100000);
  }
  FAIL() << "the door did not serve again after the flood";
}

TEST_F(FlexDoorTest, GoesAwayWithTheDaemon) {
  ASSERT_EQ(StopDaemon(), 0);
  struct stat st;
  EXPECT_NE(::stat(door_.c_str(), &st), 0) << door_ << " left behind after a clean stop";
}

}  // namespace
}  // namespace nodevol::testing
