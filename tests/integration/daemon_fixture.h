// DaemonFixture: a real nodevold in a sandbox for integration tests.
//
// Each test gets a fresh temporary directory holding the pods root, the
// state dir, a dir pool and the socket; the daemon binary built by this
// tree runs there as a child process, and is driven through its gRPC API
// (stub()) or the real nodevolctl (Ctl()). Requires root (real mounts):
// without it the test skips, or fails under CI=true.
// TearDown unmounts anything left below the sandbox and removes it.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "nodevol/v1/node.grpc.pb.h"

namespace nodevol::testing {

class DaemonFixture : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Starts nodevold (extra flags appended) and waits until it has sent
  // READY=1 (unless NOTIFY_SOCKET is the test's own) and answers GetInfo;
  // fails the test after 10 s.
  void StartDaemon(const std::vector<std::string>& extra_flags = {});
  // The flags StartDaemon runs nodevold with (creates the sandbox's empty
  // config file), for tests that run the binary themselves.
  std::vector<std::string> DaemonFlags();
  // Spawns nodevold with DaemonFlags() + extra, stderr appended to
  // log_path_; returns its pid (-1 on failure) without waiting for it.
  pid_t SpawnDaemon(const std::vector<std::string>& extra = {});
  // SIGTERM and wait (clean stop); returns the exit status.
  int StopDaemon();
  // SIGKILL and reap.
  void KillDaemon();
  bool DaemonRunning() const { return pid_ > 0; }
  pid_t daemon_pid() const { return pid_; }

  v1::Node::Stub* stub() { return stub_.get(); }
  // A fresh stub (e.g. one per thread).
  std::unique_ptr<v1::Node::Stub> NewStub() const;

  // Creates <pods>/<pod_uid>/volumes/nodevol.io~volume/<name> (as kubelet
  // does before calling mount) and returns its path.
  std::string MakeTarget(const std::string& pod_uid, const std::string& name, bool create = true);

  // Runs nodevolctl with --socket set; returns its exit status and fills
  // stdout/stderr.
  int Ctl(const std::vector<std::string>& args, std::string* out = nullptr, std::string* err = nullptr);

  // Convenience wrappers around the stub (10 s deadline).
  grpc::Status CreateVolume(const std::string& name, uint64_t size, const std::string& pool = "default");
  grpc::Status Publish(const std::string& volume, const std::string& target, bool read_only = false);
  grpc::Status Unpublish(const std::string& target);
  grpc::Status DeleteVolume(const std::string& name);
  // The volume as GetVolume reports it (empty on error; *status says why).
  v1::Volume GetVolume(const std::string& name, grpc::Status* status = nullptr);
  // A Publish of a 1 MiB inline volume of pool "default" at `target`.
  static v1::PublishRequest InlineRequest(const std::string& target) {
    v1::PublishRequest req;
    req.mutable_inline_()->set_pool("default");
    req.mutable_inline_()->set_size_bytes(1 << 20);
    req.set_target(target);
    return req;
  }
  // Every volume (a failed call fails the test).
  std::vector<v1::Volume> ListVolumes();

  // Whether path is a mount point in /proc/self/mountinfo (via libmount),
  // and how many mounts lie at or below dir (mounts stacked at dir count
  // one each).
  static bool IsMountPoint(const std::string& path);
  static int MountsBelow(const std::string& dir);
  // Mount options of the top-most mount at path ("" when not a mount point).
  static std::string MountOptions(const std::string& path);

  std::string root_;       // sandbox, e.g. /tmp/nodevol-it-XXXXXX
  std::string pods_root_;  // root_/pods
  std::string state_dir_;  // root_/state
  std::string pool_dir_;   // root_/pool (pool "default")
  std::string socket_;     // root_/nodevold.sock
  std::string log_path_;   // root_/nodevold.log (daemon's stderr, appended across restarts)

 private:
  int OpenReadySocket();

  pid_t pid_ = -1;
  std::string ready_socket_;  // NOTIFY_SOCKET for SpawnDaemon while StartDaemon waits
  std::unique_ptr<v1::Node::Stub> stub_;
};

// A deadline on a client call: 10 s, or `seconds`.
void SetDeadline(grpc::ClientContext* ctx, int seconds = 10);
// A whole file ("" when unreadable).
std::string ReadAll(const std::string& path);

// Runs argv (no shell), captures output; returns the exit status (or 128+signal).
int RunCommand(const std::vector<std::string>& argv, std::string* out, std::string* err);

}  // namespace nodevol::testing
