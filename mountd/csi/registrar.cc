#include "csi/registrar.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "pluginregistration/v1/api.grpc.pb.h"

namespace nodevol::csi {

namespace reg = ::pluginregistration;
using Clock = std::chrono::steady_clock;

class Registrar::Service final : public reg::Registration::Service {
 public:
  explicit Service(Registrar* owner) : owner_(owner) {}

  grpc::Status GetInfo(grpc::ServerContext*, const reg::InfoRequest*, reg::PluginInfo* out) override {
    out->set_type("CSIPlugin");
    out->set_name(owner_->options_.driver);
    out->set_endpoint(owner_->options_.endpoint);
    // kubelet's CSI handler accepts any 1.x; every registrar sends this.
    out->add_supported_versions("1.0.0");
    owner_->OnGetInfo();
    return grpc::Status::OK;
  }
  grpc::Status NotifyRegistrationStatus(grpc::ServerContext*, const reg::RegistrationStatus* in,
                                        reg::RegistrationStatusResponse*) override {
    owner_->OnStatus(in->plugin_registered(), in->error());
    return grpc::Status::OK;
  }

 private:
  Registrar* owner_;
};

namespace {

// Whether a connect to the unix socket at `path` is accepted.
bool SomeoneListens(const std::string& path) {
  struct sockaddr_un addr = {};
  if (path.size() >= sizeof addr.sun_path) return false;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool listens = ::connect(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return listens;
}

}  // namespace

struct Registrar::Served {
  std::unique_ptr<grpc::Server> server;
  dev_t dev = 0;
  ino_t ino = 0;
};

Registrar::Registrar(Options options) : options_(std::move(options)), service_(std::make_unique<Service>(this)) {}

Registrar::~Registrar() { Stop(); }

Status Registrar::Serve() {
  const std::string& path = options_.socket;
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return Status::FailedPrecondition(path + " exists and is not a socket; remove it");
    // A socket someone still accepts on is another process's (a second
    // nodevold, another plugin of this name): not ours to take. Only a
    // stale one (nobody listening) is removed.
    if (SomeoneListens(path))
      return Status::FailedPrecondition("another process serves " + path +
                                        " (a second nodevold, or another plugin under driver name " +
                                        options_.driver + "); nodevold leaves it alone and tries again");
    ::unlink(path.c_str());
  }
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
  b.RegisterService(service_.get());
  auto served = std::make_unique<Served>();
  served->server = b.BuildAndStart();
  if (!served->server)
    return Status::Unavailable("cannot listen on " + path + " (does kubelet's plugins_registry directory exist?)");
  // kubelet runs as root; nobody else has business with this socket.
  if (::chmod(path.c_str(), 0600) != 0 || ::lstat(path.c_str(), &st) != 0) {
    Status s = Status::FromErrno("chmod " + path, errno);
    served->server->Shutdown();
    return s;
  }
  served->dev = st.st_dev;
  served->ino = st.st_ino;
  std::lock_guard<std::mutex> l(mu_);
  served_ = std::move(served);
  state_.sockets++;
  awaiting_status_ = false;
  return Status::Ok();
}

void Registrar::Unserve() {
  std::unique_ptr<Served> served;
  {
    std::lock_guard<std::mutex> l(mu_);
    served = std::move(served_);
  }
  if (!served) return;
  served->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  // Remove the file only if it is still ours: another registrar (a new
  // nodevold during an upgrade) may have put its own there.
  struct stat st;
  if (::lstat(options_.socket.c_str(), &st) == 0 && st.st_dev == served->dev && st.st_ino == served->ino)
    ::unlink(options_.socket.c_str());
}

bool Registrar::SocketIsOurs() const {
  struct stat st;
  std::lock_guard<std::mutex> l(mu_);
  return served_ && ::lstat(options_.socket.c_str(), &st) == 0 && st.st_dev == served_->dev &&
         st.st_ino == served_->ino;
}

Status Registrar::Start() {
  NODEVOL_RETURN_IF_ERROR(Serve());
  spdlog::info("csi: registration socket {} for kubelet (driver {}, endpoint {})", options_.socket,
               options_.driver, options_.endpoint);
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void Registrar::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  Unserve();
}

Registrar::State Registrar::state() const {
  std::lock_guard<std::mutex> l(mu_);
  return state_;
}

void Registrar::OnGetInfo() {
  std::lock_guard<std::mutex> l(mu_);
  state_.get_info++;
  awaiting_status_ = true;
  awaiting_status_since_ = Clock::now();
}

void Registrar::OnStatus(bool registered, const std::string& error) {
  {
    std::lock_guard<std::mutex> l(mu_);
    awaiting_status_ = false;
    state_.registered = registered;
    if (!registered) {
      state_.last_error = "kubelet: " + error;
      remake_ = true;
    }
  }
  if (registered)
    spdlog::info("csi: kubelet registered driver {}", options_.driver);
  else
    spdlog::warn("csi: kubelet failed to register driver {}: {}; offering a new socket", options_.driver, error);
  cv_.notify_all();
}

void Registrar::Loop() {
  auto backoff = options_.initial_backoff;
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    cv_.wait_for(l, options_.check_every, [&] { return stop_ || remake_; });
    if (stop_) break;
    std::string why;
    if (remake_) {
      why = state_.last_error;
    } else if (awaiting_status_ && Clock::now() - awaiting_status_since_ >= options_.notify_timeout) {
      why = "no registration status from kubelet within " + std::to_string(options_.notify_timeout.count()) +
            " ms of its GetInfo";
    } else {
      l.unlock();
      bool ours = SocketIsOurs();
      l.lock();
      if (ours) {
        if (state_.registered) backoff = options_.initial_backoff;
        continue;
      }
      why = "the registration socket " + options_.socket + " is gone or replaced";
    }
    remake_ = false;
    state_.registered = false;
    state_.last_error = why;
    l.unlock();
    spdlog::warn("csi: {}; a new registration socket in {} ms", why, backoff.count());
    Unserve();
    l.lock();
    if (cv_.wait_for(l, backoff, [&] { return stop_; })) break;
    backoff = std::min(backoff * 2, options_.max_backoff);
    l.unlock();
    Status st = Serve();
    l.lock();
    if (!st.ok()) {
      state_.last_error = st.message();
      spdlog::warn("csi: {}", st.message());
      remake_ = true;  // try again after the next backoff
    }
  }
}

}  // namespace nodevol::csi
