#include "daemon_fixture.h"

#include <algorithm>

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "mount/mount_table.h"

extern char** environ;

namespace nodevol::testing {
namespace {

std::chrono::system_clock::time_point Deadline(int seconds = 10) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

}  // namespace

void SetDeadline(grpc::ClientContext* ctx, int seconds) { ctx->set_deadline(Deadline(seconds)); }

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

int RunCommand(const std::vector<std::string>& argv, std::string* out, std::string* err) {
  char tmpl_out[] = "/tmp/nodevol-cmd-out-XXXXXX";
  char tmpl_err[] = "/tmp/nodevol-cmd-err-XXXXXX";
  int fo = mkstemp(tmpl_out), fe = mkstemp(tmpl_err);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fo, 1);
  posix_spawn_file_actions_adddup2(&fa, fe, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fo);
  close(fe);
  int status = 0;
  if (rc == 0) waitpid(pid, &status, 0);
  if (out) *out = ReadAll(tmpl_out);
  if (err) *err = ReadAll(tmpl_err);
  unlink(tmpl_out);
  unlink(tmpl_err);
  if (rc != 0) return 127;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void DaemonFixture::SetUp() {
  if (geteuid() != 0) {
    // CI must run every integration test: there a missing root is a failure,
    // not a skip that leaves ctest green with nothing mounted.
    const char* ci = std::getenv("CI");
    if (ci && std::string(ci) == "true") GTEST_FAIL() << "CI=true: integration tests need root (real mounts); run as root";
    GTEST_SKIP() << "integration tests need root (real mounts)";
  }
  char tmpl[] = "/tmp/nodevol-it-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  root_ = tmpl;
  pods_root_ = root_ + "/pods";
  state_dir_ = root_ + "/state";
  pool_dir_ = root_ + "/pool";
  socket_ = root_ + "/nodevold.sock";
  log_path_ = root_ + "/nodevold.log";
  std::filesystem::create_directories(pods_root_);
  std::filesystem::create_directories(pool_dir_);
}

void DaemonFixture::TearDown() {
  if (root_.empty()) return;
  if (pid_ > 0) StopDaemon();
  // Unmount whatever a failed test left, deepest first.
  nodevol::MountTable table;
  if (table.Load().ok()) {
    auto below = table.Below(root_);
    for (auto it = below.rbegin(); it != below.rend(); ++it) umount2((*it)->target.c_str(), MNT_DETACH);
  }
  if (HasFailure()) {
    std::cerr << "---- nodevold log (" << log_path_ << ") ----\n" << ReadAll(log_path_) << "----\n";
  }
  if (getenv("NODEVOL_KEEP_SANDBOX")) return;  // for debugging a failure
  std::error_code ec;
  std::filesystem::remove_all(root_, ec);
}

std::vector<std::string> DaemonFixture::DaemonFlags() {
  // A named config file must exist: point it at an empty one.
  std::string conf = root_ + "/nodevold.conf";
  std::ofstream(conf, std::ios::app).close();
  return {"--config=" + conf,
          "--socket=" + socket_,
          "--state-dir=" + state_dir_,
          "--pods-root=" + pods_root_,
          "--pool=name=default,backend=dir,path=" + pool_dir_ + ",inline=on,inline-max-size=1Ti",
          "--metrics-address=off",
          "--log-target=stderr",
          "--log-level=debug"};
}

pid_t DaemonFixture::SpawnDaemon(const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {NODEVOLD_PATH};
  // A test's own --metrics-address replaces the default "off" (nodevold
  // refuses an option given twice).
  bool metrics = std::any_of(extra.begin(), extra.end(), [](const std::string& f) { return f.starts_with("--metrics-address="); });
  for (std::string& f : DaemonFlags())
    if (!(metrics && f.starts_with("--metrics-address="))) argv.push_back(std::move(f));
  argv.insert(argv.end(), extra.begin(), extra.end());
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The environment, plus StartDaemon's notify socket when it has one.
  std::string notify = "NOTIFY_SOCKET=" + ready_socket_;
  std::vector<char*> env;
  for (char** e = environ; *e; ++e) env.push_back(*e);
  if (!ready_socket_.empty()) env.push_back(notify.data());
  env.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

// An abstract unix datagram socket (no file in the sandbox, whose tree
// tests compare) for nodevold's READY=1; -1 if it cannot be made.
int DaemonFixture::OpenReadySocket() {
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string name = "nodevol-it-ready-" + std::to_string(getpid()) + "-" + root_.substr(root_.rfind('/') + 1);
  name.copy(addr.sun_path + 1, sizeof addr.sun_path - 2);
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    close(fd);
    return -1;
  }
  ready_socket_ = "@" + name;
  return fd;
}

void DaemonFixture::StartDaemon(const std::vector<std::string>& extra) {
  // Unless the test plays systemd itself (its own NOTIFY_SOCKET), wait for
  // READY=1 as systemd does: the Node socket answers before the CSI and
  // registration sockets are made, and a test that looks at the sandbox
  // right after GetInfo answers would race with them.
  int ready_fd = std::getenv("NOTIFY_SOCKET") ? -1 : OpenReadySocket();
  if (ready_fd >= 0) {
    timeval tv{0, 20000};
    setsockopt(ready_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  struct Closer {
    int fd;
    std::string* name;
    ~Closer() {
      if (fd >= 0) close(fd);
      name->clear();
    }
  } closer{ready_fd, &ready_socket_};
  pid_ = SpawnDaemon(extra);
  ASSERT_GT(pid_, 0) << "cannot spawn " << NODEVOLD_PATH;

  bool ready = ready_fd < 0;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < until) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      FAIL() << "nodevold exited during start:\n" << ReadAll(log_path_);
    }
    if (!ready) {
      char buf[512];
      ssize_t n = recv(ready_fd, buf, sizeof buf, 0);  // waits up to 20 ms
      ready = n > 0 && std::string(buf, static_cast<size_t>(n)).find("READY=1") != std::string::npos;
      continue;
    }
    if (access(socket_.c_str(), F_OK) == 0) {
      if (!stub_) stub_ = NewStub();
      grpc::ClientContext ctx;
      ctx.set_deadline(Deadline(1));
      ctx.set_wait_for_ready(true);
      v1::GetInfoResponse resp;
      if (stub_->GetInfo(&ctx, v1::GetInfoRequest(), &resp).ok()) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  FAIL() << "nodevold did not " << (ready ? "answer" : "send READY=1") << " within 10 s:\n" << ReadAll(log_path_);
}

int DaemonFixture::StopDaemon() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  stub_.reset();
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void DaemonFixture::KillDaemon() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  stub_.reset();
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::unique_ptr<v1::Node::Stub> DaemonFixture::NewStub() const {
  // Retry connecting every 100 ms while the daemon starts (gRPC's default
  // backoff would add seconds).
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
  return v1::Node::NewStub(
      grpc::CreateCustomChannel("unix:" + socket_, grpc::InsecureChannelCredentials(), args));
}

std::string DaemonFixture::MakeTarget(const std::string& pod_uid, const std::string& name, bool create) {
  std::string dir = pods_root_ + "/" + pod_uid + "/volumes/nodevol.io~volume";
  std::filesystem::create_directories(dir);
  std::string t = dir + "/" + name;
  if (create) std::filesystem::create_directories(t);
  return t;
}

int DaemonFixture::Ctl(const std::vector<std::string>& args, std::string* out, std::string* err) {
  std::vector<std::string> argv = {NODEVOLCTL_PATH, "--socket", socket_};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, out, err);
}

grpc::Status DaemonFixture::CreateVolume(const std::string& name, uint64_t size, const std::string& pool) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline());
  v1::CreateVolumeRequest req;
  req.set_name(name);
  req.set_pool(pool);
  req.set_size_bytes(size);
  v1::CreateVolumeResponse resp;
  return stub_->CreateVolume(&ctx, req, &resp);
}

grpc::Status DaemonFixture::Publish(const std::string& volume, const std::string& target, bool read_only) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline());
  v1::PublishRequest req;
  req.set_volume(volume);
  req.set_target(target);
  req.set_read_only(read_only);
  v1::PublishResponse resp;
  return stub_->Publish(&ctx, req, &resp);
}

grpc::Status DaemonFixture::DeleteVolume(const std::string& name) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::DeleteVolumeRequest req;
  req.set_name(name);
  v1::DeleteVolumeResponse resp;
  return stub_->DeleteVolume(&ctx, req, &resp);
}

v1::Volume DaemonFixture::GetVolume(const std::string& name, grpc::Status* status) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::GetVolumeRequest req;
  req.set_name(name);
  v1::GetVolumeResponse resp;
  grpc::Status st = stub()->GetVolume(&ctx, req, &resp);
  if (status) *status = st;
  return resp.volume();
}

std::vector<v1::Volume> DaemonFixture::ListVolumes() {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::ListVolumesResponse resp;
  grpc::Status st = stub()->ListVolumes(&ctx, v1::ListVolumesRequest(), &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return {resp.volumes().begin(), resp.volumes().end()};
}

grpc::Status DaemonFixture::Unpublish(const std::string& target) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline());
  v1::UnpublishRequest req;
  req.set_target(target);
  v1::UnpublishResponse resp;
  return stub_->Unpublish(&ctx, req, &resp);
}

bool DaemonFixture::IsMountPoint(const std::string& path) {
  nodevol::MountTable table;
  return table.Load().ok() && table.FindTarget(path) != nullptr;
}

int DaemonFixture::MountsBelow(const std::string& dir) {
  nodevol::MountTable table;
  if (!table.Load().ok()) return -1;
  // Every mount at dir itself, not just the top one: a second bind stacked
  // on a target is exactly what repeat-mount tests must see.
  int at = 0;
  for (const MountEntry& e : table.entries()) at += e.target == dir ? 1 : 0;
  return static_cast<int>(table.Below(dir).size()) + at;
}

std::string DaemonFixture::MountOptions(const std::string& path) {
  nodevol::MountTable table;
  if (!table.Load().ok()) return "";
  const MountEntry* e = table.FindTarget(path);
  return e ? e->options : "";
}

}  // namespace nodevol::testing
