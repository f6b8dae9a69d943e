#include "client.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "base/frame.h"
#include "base/status.h"

namespace nodevol::flex {
namespace {

using Clock = std::chrono::steady_clock;

std::string Seconds(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + "s";
  return std::to_string(d.count()) + "ms";
}

std::chrono::milliseconds Left(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

// Whether something listens on the unix socket at path (not a file left
// by a daemon that died).
bool Accepts(const std::string& path) {
  struct sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return false;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

Client::Client(const Config& config)
    : config_(config), door_(config.socket + ".flex"), deadline_(Clock::now() + config.timeout) {}

bool Client::Connect(std::string* error) {
  struct sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (door_.size() >= sizeof addr.sun_path) {
    *error = "socket path " + door_ + " is too long for a unix socket";
    return false;
  }
  std::memcpy(addr.sun_path, door_.c_str(), door_.size() + 1);
  auto give_up = std::min(deadline_, Clock::now() + config_.connect_timeout);
  int err = 0;
  for (;;) {
    fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (fd_.get() < 0) {
      *error = std::string("cannot make a socket: ") + std::strerror(errno);
      return false;
    }
    if (::connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return true;
    err = errno;
    // Missing or refused: nodevold may be restarting; try again shortly.
    if ((err != ENOENT && err != ECONNREFUSED && err != EAGAIN) || Clock::now() + std::chrono::milliseconds(100) > give_up)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  fd_.reset();
  *error = Unreachable(err);
  return false;
}

bool Client::Call(v1::DoorRequest request, v1::DoorResponse* response, std::string* error) {
  auto left = Left(deadline_);
  request.set_timeout_ms(static_cast<uint32_t>(left.count()));
  struct timeval tv = {static_cast<time_t>(left.count() / 1000), static_cast<suseconds_t>(left.count() % 1000 * 1000)};
  ::setsockopt(fd_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd_.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  std::string bytes;
  request.SerializeToString(&bytes);
  FrameResult r = WriteFrame(fd_.get(), bytes);
  if (r == FrameResult::kOk) r = ReadFrame(fd_.get(), kMaxFrame, &bytes);
  if (r == FrameResult::kTimeout || (r != FrameResult::kOk && Clock::now() >= deadline_)) {
    *error = "nodevold at " + config_.socket + " did not answer within " + Seconds(config_.timeout) +
             "; check `systemctl status nodevold` and its journal";
    return false;
  }
  if (r != FrameResult::kOk) {
    *error = "nodevold at " + door_ + " closed the connection without an answer" +
             (r == FrameResult::kTooLarge ? std::string(" (answer too large)") : "") +
             "; if it is down, check `systemctl status nodevold`";
    return false;
  }
  if (!response->ParseFromString(bytes)) {
    *error = "nodevold at " + door_ + " answered something that is not a DoorResponse; is it older than the driver?";
    return false;
  }
  return true;
}

// Says why the socket does not accept, as far as the driver can see.
std::string Client::Unreachable(int err) const {
  std::string why;
  struct stat st;
  if (::stat(door_.c_str(), &st) != 0) {
    int stat_err = errno;
    struct stat api;
    // The Node API socket without the door: a daemon older than this
    // driver (0.1.0 had no door), still running after a package upgrade.
    if (stat_err == ENOENT && ::stat(config_.socket.c_str(), &api) == 0 && S_ISSOCK(api.st_mode) && Accepts(config_.socket))
      return "nodevold at " + config_.socket + " serves no flex door at " + door_ +
             ": it is older than this driver (waited " + Seconds(config_.connect_timeout) +
             "); restart it to run the installed version: `systemctl restart nodevold`";
    why = stat_err == ENOENT ? "the socket does not exist" : std::string("cannot stat the socket: ") + std::strerror(stat_err);
  } else if (!S_ISSOCK(st.st_mode)) {
    why = "it is not a socket";
  } else if (err == EACCES || ::access(door_.c_str(), R_OK | W_OK) != 0) {
    why = "permission denied (the driver must run as root)";
  } else {
    why = "nobody accepts connections on it";
  }
  return "nodevold is not reachable at " + door_ + " (" + why + ", waited " + Seconds(config_.connect_timeout) +
         "); check `systemctl status nodevold`";
}

std::string Client::Describe(std::string_view what, const v1::DoorResponse& response) const {
  // Status's codes are gRPC's, number for number.
  Status status(static_cast<Status::Code>(response.code()), response.message());
  std::string text = std::string(what) + ": " + status.message() + " (" + std::string(status.code_name()) + ")";
  // Either the daemon went away mid-call or a backend it needs is down.
  if (status.code() == Status::Code::kUnavailable)
    text += "; if nodevold at " + config_.socket + " is down, check `systemctl status nodevold`";
  return text;
}

}  // namespace nodevol::flex
