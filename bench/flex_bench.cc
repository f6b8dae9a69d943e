// flex_bench: latency of the FlexVolume driver as kubelet sees it, against a
// reference driver written the way the well-known example drivers are
// (bench/reference-flex/volume: bash + jq + mount(8) doing the same bind).
//
// Must run as root (real mounts); needs jq for the reference. It starts its
// own nodevold in a sandbox with a dir pool, creates one volume, and then
// runs both drivers exactly as kubelet does (fork+exec, argv as in the
// contract, stdin /dev/null, stdout and stderr in one pipe read to EOF),
// alternating them so background load hits both alike:
//   init            one `init` call
//   mount+unmount   `mount <dir> <json>` then `unmount <dir>` of the same
//                   volume (nodevol: option volume; reference: option source
//                   = the volume's data directory)
// and a floor: fork+exec of /bin/true through the same path. Prints a
// Markdown table with p50/p99 and the reference/nodevol ratio.
//
//   sudo build/bench/flex_bench [--iterations=N] [--keep-sandbox] [--also=PATH]
//
// --also=PATH: another nodevol-flex binary (e.g. a previous build), run in
// the same rounds against the same daemon and reported in extra rows: a
// before/after in one run, under the same background load.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "nodevol/v1/node.grpc.pb.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
namespace v1 = nodevol::v1;
using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "flex_bench: %s\n", why.c_str());
  std::exit(1);
}

// Runs argv as kubelet runs a driver; returns microseconds, fills output.
double RunLikeKubelet(const std::vector<std::string>& argv, const std::vector<std::string>& env, std::string* out) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) Die("pipe");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  auto start = Clock::now();
  pid_t pid;
  if (posix_spawn(&pid, args[0], &fa, nullptr, args.data(), envp.data()) != 0) Die("spawn " + argv[0]);
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  out->clear();
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    out->append(buf, n);
  }
  ::close(fds[0]);
  int status;
  ::waitpid(pid, &status, 0);
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

struct Series {
  std::vector<double> us;
  double Pct(double p) {
    std::sort(us.begin(), us.end());
    return us[std::min(us.size() - 1, static_cast<size_t>(p * us.size()))];
  }
};

std::string Ms(double us) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f ms", us / 1000);
  return b;
}

void ExpectSuccess(const std::string& what, const std::string& out) {
  if (out.find("\"status\":\"Success\"") == std::string::npos &&
      out.find("\"status\": \"Success\"") == std::string::npos)
    Die(what + " failed: " + out);
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 300;
  bool keep = false;
  std::string also;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.starts_with("--iterations=")) iterations = std::atoi(a.c_str() + 13);
    else if (a == "--keep-sandbox") keep = true;
    else if (a.starts_with("--also=")) also = a.substr(7);
    else Die("usage: flex_bench [--iterations=N] [--keep-sandbox] [--also=PATH]");
  }
  if (iterations < 10) Die("--iterations must be at least 10");
  if (::geteuid() != 0) Die("must run as root (real mounts)");
  std::string jq_out;
  RunLikeKubelet({"/usr/bin/env", "jq", "--version"}, {"PATH=/usr/bin:/bin"}, &jq_out);
  if (!jq_out.starts_with("jq-")) Die("the reference driver needs jq: apt-get install jq");

  char tmpl[] = "/tmp/nodevol-flexbench-XXXXXX";
  if (!::mkdtemp(tmpl)) Die("mkdtemp");
  std::string root = tmpl, socket = root + "/nodevold.sock";
  for (const char* d : {"/pods", "/state", "/pool"}) fs::create_directories(root + d);
  std::ofstream(root + "/nodevold.conf").close();

  std::vector<std::string> dargv = {NODEVOLD_PATH, "--config", root + "/nodevold.conf", "--socket", socket,
                                    "--state-dir", root + "/state", "--pods-root", root + "/pods",
                                    "--pool", "name=default,backend=dir,path=" + root + "/pool,quota=off",
                                    "--metrics-address", "off", "--log-level", "warn", "--node-name", "bench"};
  std::vector<char*> dargs;
  for (auto& a : dargv) dargs.push_back(a.data());
  dargs.push_back(nullptr);
  pid_t daemon;
  if (posix_spawn(&daemon, dargs[0], nullptr, nullptr, dargs.data(), environ) != 0) Die("start nodevold");

  auto stub = v1::Node::NewStub(grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));
  v1::CreateVolumeResponse created;
  for (int tries = 0;; ++tries) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    ctx.set_wait_for_ready(true);
    v1::CreateVolumeRequest req;
    req.set_name("bench");
    req.set_pool("default");
    req.set_size_bytes(64 << 20);
    // The claim's namespace: nodevold publishes the volume only into its pods.
    (*req.mutable_parameters())["nodevol.io/pvc-namespace"] = "default";
    if (stub->CreateVolume(&ctx, req, &created).ok()) break;
    if (tries == 10) Die("nodevold did not start");
  }
  std::string source = created.volume().attributes().at("path");

  // Both drivers at kubelet's path for them, as a real plugin dir would hold.
  std::string target = root + "/pods/0f0e0d0c-1111-2222-3333-444455556666/volumes/nodevol.io~volume/data";
  fs::create_directories(target);
  std::string kubelet_keys =
      R"("kubernetes.io/fsType":"","kubernetes.io/pod.name":"bench-0","kubernetes.io/pod.namespace":"default",)"
      R"("kubernetes.io/pod.uid":"0f0e0d0c-1111-2222-3333-444455556666","kubernetes.io/pvOrVolumeName":"data",)"
      R"("kubernetes.io/readwrite":"rw","kubernetes.io/serviceAccount.name":"default")";
  struct Driver {
    std::string name, path, json;
    Series init, pair;
  };
  std::vector<Driver> drivers = {
      {"nodevol-flex", NODEVOL_FLEX_PATH, "{" + kubelet_keys + R"(,"volume":"bench"})", {}, {}},
      {"reference (bash+jq)", REFERENCE_FLEX_PATH, "{" + kubelet_keys + R"(,"source":")" + source + "\"}", {}, {}},
  };
  if (!also.empty()) drivers.push_back({also, also, drivers[0].json, {}, {}});
  std::vector<std::string> env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "NODEVOL_FLEX_SOCKET=" + socket,
                                   "NODEVOL_FLEX_CONFIG=/nonexistent"};
  Series floor;
  std::string out;
  for (int i = -5; i < iterations; ++i) {  // 5 untimed warm-up rounds
    double t = RunLikeKubelet({"/bin/true"}, env, &out);
    if (i >= 0) floor.us.push_back(t);
    for (auto& d : drivers) {
      t = RunLikeKubelet({d.path, "init"}, env, &out);
      ExpectSuccess(d.name + " init", out);
      if (i >= 0) d.init.us.push_back(t);
      t = RunLikeKubelet({d.path, "mount", target, d.json}, env, &out);
      ExpectSuccess(d.name + " mount", out);
      t += RunLikeKubelet({d.path, "unmount", target}, env, &out);
      ExpectSuccess(d.name + " unmount", out);
      if (i >= 0) d.pair.us.push_back(t);
    }
  }

  std::printf("| call (%d runs each) | nodevol-flex p50 | p99 | reference p50 | p99 | reference / nodevol (p50) |\n"
              "|---|---|---|---|---|---|\n", iterations);
  auto row = [&](const char* what, Series& a, Series& b) {
    std::printf("| %s | %s | %s | %s | %s | %.1fx |\n", what, Ms(a.Pct(0.5)).c_str(), Ms(a.Pct(0.99)).c_str(),
                Ms(b.Pct(0.5)).c_str(), Ms(b.Pct(0.99)).c_str(), b.Pct(0.5) / a.Pct(0.5));
  };
  row("init", drivers[0].init, drivers[1].init);
  row("mount+unmount", drivers[0].pair, drivers[1].pair);
  if (drivers.size() > 2) {
    row(("init, " + also).c_str(), drivers[2].init, drivers[1].init);
    row(("mount+unmount, " + also).c_str(), drivers[2].pair, drivers[1].pair);
  }
  std::printf("| floor: fork+exec of /bin/true | %s | %s | | | |\n", Ms(floor.Pct(0.5)).c_str(),
              Ms(floor.Pct(0.99)).c_str());

  ::kill(daemon, SIGTERM);
  ::waitpid(daemon, nullptr, 0);
  ::umount2(target.c_str(), MNT_DETACH);
  if (!keep) fs::remove_all(root);
  return 0;
}
