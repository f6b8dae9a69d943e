#include "server/flex_door.h"

#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "base/call_scope.h"
#include "base/frame.h"
#include "base/unique_fd.h"
#include "nodevol/v1/flex_door.pb.h"
#include "server/node_service.h"

namespace nodevol {
namespace {

using SysClock = std::chrono::system_clock;

void SetTimeouts(int fd, std::chrono::milliseconds t) {
  struct timeval tv = {static_cast<time_t>(t.count() / 1000), static_cast<suseconds_t>(t.count() % 1000 * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

void Answer(int fd, const v1::DoorResponse& resp) {
  std::string bytes;
  resp.SerializeToString(&bytes);
  WriteFrame(fd, bytes);
}

// Answers, then waits (at most a second, reading at most 1 MiB) for the
// peer to close: closing at once would drop a request still on its way
// and reset the connection, so the peer could fail to send before it
// reads the answer (seen under load).
void AnswerAndClose(int fd, const v1::DoorResponse& resp) {
  Answer(fd, resp);
  ::shutdown(fd, SHUT_WR);
  SetTimeouts(fd, std::chrono::seconds(1));
  char buf[4096];
  for (size_t read = 0; read < kMaxFrame;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    read += static_cast<size_t>(n);
  }
}

v1::DoorResponse Refusal(Status::Code code, std::string message) {
  v1::DoorResponse r;
  r.set_code(static_cast<int>(code));
  r.set_message(std::move(message));
  return r;
}

// One request, answered by the service as its RPC would be.
v1::DoorResponse Serve(NodeService* service, const v1::DoorRequest& req) {
  // The driver's deadline, as gRPC would carry it; nodevold's own when
  // the driver gives none. Less a tenth (at most half a second): the
  // answer must reach the driver before it stops waiting, or a call that
  // was refused in time reads as one that never answered.
  std::chrono::milliseconds limit(req.timeout_ms());
  limit -= std::min<std::chrono::milliseconds>(limit / 10, std::chrono::milliseconds(500));
  SysClock::time_point deadline = req.timeout_ms() ? SysClock::now() + limit : SysClock::time_point::max();
  v1::DoorResponse resp;
  grpc::Status st;
  // Every wait of the call ends at the driver's deadline (base/call_scope.h).
  CallScope scope(deadline, "flex");
  switch (req.call_case()) {
    case v1::DoorRequest::kPublish:
      st = service->Publish(req.publish(), deadline, resp.mutable_publish());
      break;
    case v1::DoorRequest::kUnpublish:
      st = service->Unpublish(nullptr, &req.unpublish(), resp.mutable_unpublish());
      break;
    case v1::DoorRequest::kGetVolume:
      st = service->GetVolume(nullptr, &req.get_volume(), resp.mutable_get_volume());
      break;
    case v1::DoorRequest::kExpandVolume:
      st = service->ExpandVolume(nullptr, &req.expand_volume(), resp.mutable_expand_volume());
      break;
    case v1::DoorRequest::CALL_NOT_SET:
      return Refusal(Status::Code::kInvalidArgument,
                     "the request names no call (publish, unpublish, get_volume or expand_volume); is the "
                     "driver newer than nodevold?");
  }
  if (!st.ok()) {
    resp.Clear();
    resp.set_code(st.error_code());
    resp.set_message(st.error_message());
  }
  return resp;
}

}  // namespace

struct FlexDoor::Impl {
  std::weak_ptr<Impl> self;
  NodeService* service;
  Options options;
  UniqueFd listener;
  UniqueFd stop_read, stop_write;  // a pipe: written once to end the accept loop
  std::thread acceptor;
  std::mutex mu;
  std::condition_variable idle;
  size_t active = 0;  // connections being served (guarded by mu)
  bool started = false;

  void AcceptLoop() {
    struct pollfd fds[2] = {{listener.get(), POLLIN, 0}, {stop_read.get(), POLLIN, 0}};
    for (;;) {
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        spdlog::error("flex door: poll: {}", std::strerror(errno));
        return;
      }
      if (fds[1].revents) return;
      int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        // E.g. EMFILE: back off instead of spinning, then accept again.
        if (errno != EINTR && errno != EAGAIN) {
          spdlog::warn("flex door: accept failed: {}", std::strerror(errno));
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        continue;
      }
      UniqueFd conn(fd);
      {
        std::lock_guard<std::mutex> lock(mu);
        if (active >= options.max_connections) {
          spdlog::warn("flex door: {} connections served already; one more closed", active);
          continue;
        }
        ++active;
      }
      // The thread holds the Impl: a call still running when Stop gives up
      // waiting must not outlive the mutex it reports to.
      std::thread([self = self.lock(), fd = conn.release()] {
        UniqueFd c(fd);
        self->ServeConnection(c.get());
        c.reset();
        std::lock_guard<std::mutex> lock(self->mu);
        if (--self->active == 0) self->idle.notify_all();
      }).detach();
    }
  }

  void ServeConnection(int fd) {
    SetTimeouts(fd, options.idle_timeout);
    struct ucred cred = {};
    socklen_t len = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != 0) {
      spdlog::warn("flex door: refused a connection from uid {} pid {}: only root may call", cred.uid, cred.pid);
      AnswerAndClose(fd, Refusal(Status::Code::kPermissionDenied, "only root may call nodevold's flex door"));
      return;
    }
    for (;;) {
      std::string bytes;
      switch (ReadFrame(fd, kMaxFrame, &bytes)) {
        case FrameResult::kOk: break;
        case FrameResult::kTooLarge:
          AnswerAndClose(fd, Refusal(Status::Code::kInvalidArgument, "request larger than 1 MiB"));
          return;
        default: return;  // closed, idle past the timeout, or broken
      }
      v1::DoorRequest req;
      if (!req.ParseFromString(bytes)) {
        Answer(fd, Refusal(Status::Code::kInvalidArgument, "the request is not a nodevol.v1.DoorRequest"));
        return;
      }
      Answer(fd, Serve(service, req));
      if (req.call_case() == v1::DoorRequest::CALL_NOT_SET) return;
    }
  }
};

FlexDoor::FlexDoor(NodeService* service) : impl_(std::make_shared<Impl>()) {
  impl_->self = impl_;
  impl_->service = service;
}

FlexDoor::~FlexDoor() { Stop(std::chrono::steady_clock::now()); }

Status FlexDoor::Start(const Options& options) {
  Impl& d = *impl_;
  d.options = options;
  struct sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (options.path.size() >= sizeof addr.sun_path)
    return Status::InvalidArgument("flex door socket path " + options.path + " is too long for a unix socket");
  std::memcpy(addr.sun_path, options.path.c_str(), options.path.size() + 1);
  d.listener.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (d.listener.get() < 0) return Status::FromErrno("flex door: socket", errno);
  if (::bind(d.listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return Status::FromErrno("flex door: bind " + options.path, errno);
  if (::chmod(options.path.c_str(), 0600) != 0) return Status::FromErrno("chmod " + options.path, errno);
  if (::listen(d.listener.get(), SOMAXCONN) != 0) return Status::FromErrno("flex door: listen", errno);
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return Status::FromErrno("flex door: pipe", errno);
  d.stop_read.reset(p[0]);
  d.stop_write.reset(p[1]);
  d.acceptor = std::thread([&d] { d.AcceptLoop(); });
  d.started = true;
  return Status::Ok();
}

void FlexDoor::Stop(std::chrono::steady_clock::time_point deadline) {
  Impl& d = *impl_;
  if (!d.started) return;
  d.started = false;
  char b = 0;
  (void)!::write(d.stop_write.get(), &b, 1);
  d.acceptor.join();
  d.listener.reset();
  ::unlink(d.options.path.c_str());
  std::unique_lock<std::mutex> lock(d.mu);
  if (!d.idle.wait_until(lock, deadline, [&d] { return d.active == 0; }))
    spdlog::warn("flex door: {} connections still open at stop", d.active);
}

}  // namespace nodevol
