#include "client.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace nodevol::flex {
namespace {

std::string Seconds(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + "s";
  return std::to_string(d.count()) + "ms";
}

const char* CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    default: return "UNKNOWN";
  }
}

}  // namespace

Client::Client(const Config& config)
    : config_(config), deadline_(std::chrono::system_clock::now() + config.timeout) {
  grpc::ChannelArguments args;
  // Retry the socket quickly while nodevold restarts, not after seconds.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  channel_ = grpc::CreateCustomChannel("unix:" + config_.socket, grpc::InsecureChannelCredentials(), args);
  stub_ = v1::Node::NewStub(channel_);
}

bool Client::Connect(std::string* error) {
  auto connect_deadline = std::min(deadline_, std::chrono::system_clock::now() + config_.connect_timeout);
  if (channel_->WaitForConnected(connect_deadline)) return true;
  *error = Unreachable();
  return false;
}

// Says why the socket does not accept, as far as the driver can see.
std::string Client::Unreachable() const {
  std::string why;
  struct stat st;
  if (::stat(config_.socket.c_str(), &st) != 0) {
    why = errno == ENOENT ? "the socket does not exist" : std::string("cannot stat the socket: ") + std::strerror(errno);
  } else if (!S_ISSOCK(st.st_mode)) {
    why = "it is not a socket";
  } else if (::access(config_.socket.c_str(), R_OK | W_OK) != 0) {
    why = "permission denied (the driver must run as root)";
  } else {
    why = "nobody accepts connections on it";
  }
  return "nodevold is not reachable at " + config_.socket + " (" + why + ", waited " +
         Seconds(config_.connect_timeout) + "); check `systemctl status nodevold`";
}

std::string Client::Describe(std::string_view what, const grpc::Status& status) const {
  std::string text = std::string(what) + ": ";
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && std::chrono::system_clock::now() >= deadline_)
    return text + "nodevold at " + config_.socket + " did not answer within " + Seconds(config_.timeout) +
           "; check `systemctl status nodevold` and its journal";
  text += status.error_message() + " (" + CodeName(status.error_code()) + ")";
  // Either the daemon went away mid-call or a backend it needs is down.
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE)
    text += "; if nodevold at " + config_.socket + " is down, check `systemctl status nodevold`";
  return text;
}

}  // namespace nodevol::flex
