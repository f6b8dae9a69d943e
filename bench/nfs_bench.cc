// nfs_bench: what a pod start/stop costs on NFS, through nodevold against
// what kubelet's in-tree NFS plugin does (issue 5).
//
// One pair = mount a subdirectory volume into a fresh pod volume directory,
// then unmount it. Three ways, alternating batch by batch within each round
// so that background load hits them alike:
//   staged     nodevold Publish + Unpublish while the export is already
//              mounted on the node (another pod uses a volume on it: an
//              "anchor" publication held for the batch): a bind of the
//              volume's directory, no NFS mount;
//   unstaged   nodevold Publish + Unpublish with no other user: each pair
//              mounts the export (mount.nfs) and unmounts it again;
//   mount -t nfs   what the in-tree plugin runs: `mount -t nfs -o OPTS
//              SERVER:SHARE/DIR TARGET`, then `umount TARGET`, each a
//              process, as kubelet execs them.
// nodevold runs in a sandbox below --work-dir with its own state dir and
// pods root, --log-level=warn, and one nfs pool on --server/--share with
// --mount-options; the volumes are made by it (CreateVolume, pathPattern
// bench-${pvName}) and deleted at the end.
//
// Must run as root where an NFS server exports --share to this host (a VM
// guest: tests/vm/nfs_bench_run.sh). Markdown on stdout, progress on stderr.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "nodevol/v1/node.grpc.pb.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
namespace v1 = nodevol::v1;

struct Options {
  std::string nodevold = NODEVOLD_PATH;
  std::string server = "127.0.0.1";
  std::string share = "/";
  std::string mount_options = "vers=4.2";
  std::string work_dir = "/tmp";
  int rounds = 5;
  int pairs = 20;  // per way per round
  int timeout = 30;
};

void Usage() {
  std::fprintf(stderr,
               "usage: nfs_bench [--server=HOST] [--share=/PATH] [--mount-options=OPTS] [--rounds=N] [--pairs=N]\n"
               "                 [--work-dir=DIR] [--nodevold=PATH]\n"
               "  --server, --share      the NFS export (default 127.0.0.1:/)\n"
               "  --mount-options        comma-separated, for nodevold's pool and mount -t nfs alike (default vers=4.2)\n"
               "  --rounds, --pairs      rounds, and pairs per way per round (default 5 x 20)\n"
               "Runs as root; prints Markdown on stdout.\n");
}

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](const char* k, std::string* out) {
      std::string p = std::string("--") + k + "=";
      if (a.rfind(p, 0) != 0) return false;
      *out = a.substr(p.size());
      return true;
    };
    std::string v;
    if (val("nodevold", &o->nodevold) || val("server", &o->server) || val("share", &o->share) ||
        val("mount-options", &o->mount_options) || val("work-dir", &o->work_dir)) {
    } else if (val("rounds", &v)) {
      o->rounds = std::max(1, std::atoi(v.c_str()));
    } else if (val("pairs", &v)) {
      o->pairs = std::max(1, std::atoi(v.c_str()));
    } else {
      Usage();
      return false;
    }
  }
  return true;
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p / 100.0 * (v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// Runs a program, waits; its exit status (-1 when it could not start).
int Exec(const std::vector<std::string>& argv, const std::string& log = "/dev/null") {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

class Daemon {
 public:
  Daemon(const Options& o, std::string root) : o_(o), root_(std::move(root)) {}

  bool Start(std::string* err) {
    for (const char* d : {"", "/pods", "/state"}) ::mkdir((root_ + d).c_str(), 0700);
    socket_ = root_ + "/nodevold.sock";
    std::string opts = o_.mount_options;
    std::replace(opts.begin(), opts.end(), ',', ' ');
    std::ofstream(root_ + "/nodevold.conf").close();
    std::vector<std::string> argv = {o_.nodevold, "--config=" + root_ + "/nodevold.conf", "--socket=" + socket_,
                                     "--state-dir=" + root_ + "/state", "--pods-root=" + root_ + "/pods",
                                     "--pool=name=nfs,backend=nfs,server=" + o_.server + ",share=" + o_.share +
                                         ",path-pattern=bench-${pvName},mount-options=" + opts,
                                     "--metrics-address=off", "--log-target=stderr", "--log-level=warn"};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, (root_ + "/nodevold.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    int rc = posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
      *err = "cannot start " + o_.nodevold + ": " + std::strerror(rc);
      return false;
    }
    stub_ = v1::Node::NewStub(grpc::CreateChannel("unix:" + socket_, grpc::InsecureChannelCredentials()));
    for (int i = 0; i < 300; ++i) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
      ctx.set_wait_for_ready(true);
      v1::GetInfoResponse resp;
      if (stub_->GetInfo(&ctx, v1::GetInfoRequest(), &resp).ok()) {
        version_ = resp.version();
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    *err = "nodevold did not answer; see " + root_ + "/nodevold.log";
    return false;
  }

  void Stop() {
    if (pid_ <= 0) return;
    stub_.reset();
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  grpc::Status Create(const std::string& name) {
    v1::CreateVolumeRequest req;
    req.set_name(name);
    req.set_pool("nfs");
    req.set_size_bytes(1 << 20);
    (*req.mutable_parameters())["nodevol.io/pv-name"] = name;
    // Right after its start nodevold has no capacity figures for the pool
    // yet (its first sample runs on its own thread) and answers
    // UNAVAILABLE "try again", as the provisioner sees it: do so.
    for (int attempt = 0;; ++attempt) {
      v1::CreateVolumeResponse resp;
      grpc::ClientContext ctx;
      Deadline(&ctx);
      grpc::Status st = stub_->CreateVolume(&ctx, req, &resp);
      if (st.error_code() != grpc::StatusCode::UNAVAILABLE || attempt >= 120) return st;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }
  grpc::Status Delete(const std::string& name) {
    v1::DeleteVolumeRequest req;
    req.set_name(name);
    v1::DeleteVolumeResponse resp;
    grpc::ClientContext ctx;
    Deadline(&ctx);
    return stub_->DeleteVolume(&ctx, req, &resp);
  }
  grpc::Status Publish(const std::string& volume, const std::string& target) {
    v1::PublishRequest req;
    req.set_volume(volume);
    req.set_target(target);
    v1::PublishResponse resp;
    grpc::ClientContext ctx;
    Deadline(&ctx);
    return stub_->Publish(&ctx, req, &resp);
  }
  grpc::Status Unpublish(const std::string& target) {
    v1::UnpublishRequest req;
    req.set_target(target);
    v1::UnpublishResponse resp;
    grpc::ClientContext ctx;
    Deadline(&ctx);
    return stub_->Unpublish(&ctx, req, &resp);
  }
  const std::string& version() const { return version_; }
  std::string Target(const std::string& pod, const std::string& volume) const {
    std::string dir = root_ + "/pods/" + pod;
    ::mkdir(dir.c_str(), 0750);
    dir += "/volumes";
    ::mkdir(dir.c_str(), 0750);
    dir += "/kubernetes.io~nfs";
    ::mkdir(dir.c_str(), 0750);
    dir += "/" + volume;
    ::mkdir(dir.c_str(), 0750);
    return dir;
  }

 private:
  void Deadline(grpc::ClientContext* ctx) {
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(o_.timeout * 3));
  }
  const Options& o_;
  std::string root_, socket_, version_;
  pid_t pid_ = -1;
  std::unique_ptr<v1::Node::Stub> stub_;
};

std::string Tool(std::initializer_list<const char*> paths) {
  for (const char* p : paths)
    if (::access(p, X_OK) == 0) return p;
  return "";
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) return 2;
  if (::geteuid() != 0) {
    std::fprintf(stderr, "nfs_bench: must run as root (it mounts)\n");
    return 2;
  }
  std::string mount = Tool({"/bin/mount", "/usr/bin/mount"}), umount = Tool({"/bin/umount", "/usr/bin/umount"});
  char tmpl[PATH_MAX];
  std::snprintf(tmpl, sizeof tmpl, "%s/nfs-bench-XXXXXX", o.work_dir.c_str());
  if (!::mkdtemp(tmpl)) {
    std::perror("mkdtemp");
    return 1;
  }
  std::string root = tmpl;
  Daemon d(o, root);
  std::string err;
  if (!d.Start(&err)) {
    std::fprintf(stderr, "nfs_bench: %s\n", err.c_str());
    return 1;
  }
  auto fail = [&](const std::string& what) {
    std::fprintf(stderr, "nfs_bench: %s\n", what.c_str());
    d.Stop();
    return 1;
  };
  const int nvol = o.pairs;
  std::vector<std::string> vols;
  for (int i = 0; i < nvol; ++i) {
    std::string name = "vol-" + std::to_string(i);
    if (grpc::Status st = d.Create(name); !st.ok()) return fail("CreateVolume " + name + ": " + st.error_message());
    vols.push_back(name);
  }
  if (grpc::Status st = d.Create("anchor"); !st.ok()) return fail("CreateVolume anchor: " + st.error_message());
  std::string anchor = d.Target("anchor-pod", "anchor");
  std::string share = o.share == "/" ? "" : o.share;

  std::map<std::string, std::vector<double>> pair_ms, mount_ms, unmount_ms;
  const std::vector<std::string> ways = {"staged", "unstaged", "mount -t nfs"};
  auto t_start = Clock::now();
  int seq = 0;
  for (int r = 0; r < o.rounds; ++r) {
    // The order of the ways rotates every round.
    for (size_t k = 0; k < ways.size(); ++k) {
      const std::string& way = ways[(k + r) % ways.size()];
      bool anchored = way == "staged";
      if (anchored)
        if (grpc::Status st = d.Publish("anchor", anchor); !st.ok()) return fail("Publish anchor: " + st.error_message());
      for (int i = 0; i < o.pairs; ++i) {
        const std::string& vol = vols[i % nvol];
        std::string target = d.Target("pod-" + std::to_string(++seq), vol);
        auto t0 = Clock::now();
        if (way == "mount -t nfs") {
          std::string src = o.server + ":" + share + "/bench-" + vol;
          int rc = Exec({mount, "-t", "nfs", "-o", o.mount_options, src, target}, root + "/mount.log");
          if (rc != 0) return fail("mount -t nfs " + src + " failed (exit " + std::to_string(rc) + "); see " + root + "/mount.log");
          auto t1 = Clock::now();
          rc = Exec({umount, target}, root + "/mount.log");
          if (rc != 0) return fail("umount " + target + " failed (exit " + std::to_string(rc) + ")");
          auto t2 = Clock::now();
          mount_ms[way].push_back(Ms(t1 - t0));
          unmount_ms[way].push_back(Ms(t2 - t1));
          pair_ms[way].push_back(Ms(t2 - t0));
        } else {
          if (grpc::Status st = d.Publish(vol, target); !st.ok()) return fail("Publish: " + st.error_message());
          auto t1 = Clock::now();
          if (grpc::Status st = d.Unpublish(target); !st.ok()) return fail("Unpublish: " + st.error_message());
          auto t2 = Clock::now();
          mount_ms[way].push_back(Ms(t1 - t0));
          unmount_ms[way].push_back(Ms(t2 - t1));
          pair_ms[way].push_back(Ms(t2 - t0));
        }
        ::rmdir(target.c_str());
      }
      if (anchored)
        if (grpc::Status st = d.Unpublish(anchor); !st.ok()) return fail("Unpublish anchor: " + st.error_message());
      std::fprintf(stderr, "round %d: %s done\n", r + 1, way.c_str());
    }
  }
  double seconds = std::chrono::duration<double>(Clock::now() - t_start).count();
  for (const std::string& v : vols) d.Delete(v);
  d.Delete("anchor");
  std::string version = d.version();
  d.Stop();
  Exec({"/bin/rm", "-rf", root});

  struct utsname u;
  ::uname(&u);
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, cpu;
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0) {
      cpu = Trim(line.substr(line.find(':') + 2));
      break;
    }
  std::ifstream la("/proc/loadavg");
  std::string load;
  std::getline(la, load);
  std::cout << "#### Machine\n\n| | |\n|---|---|\n"
            << "| CPU | " << cpu << " |\n| nproc | " << std::thread::hardware_concurrency() << " |\n"
            << "| kernel | " << u.release << " |\n| nodevold | " << version << ", --log-level=warn |\n"
            << "| export | " << o.server << ":" << o.share << " |\n| mount options | " << o.mount_options << " |\n"
            << "| load average (end) | " << load << " |\n| run time | " << seconds << " s |\n\n";
  std::cout << "#### Publish+Unpublish of a subdirectory volume (ms; " << o.rounds << " rounds x " << o.pairs
            << " pairs per way)\n\n"
            << "| way | pairs | pair p50 | pair p90 | pair p99 | mount p50 | unmount p50 |\n"
            << "|---|---:|---:|---:|---:|---:|---:|\n";
  char buf[256];
  for (const std::string& w : ways) {
    std::snprintf(buf, sizeof buf, "| %s | %zu | %.1f | %.1f | %.1f | %.1f | %.1f |\n", w.c_str(), pair_ms[w].size(),
                  Pct(pair_ms[w], 50), Pct(pair_ms[w], 90), Pct(pair_ms[w], 99), Pct(mount_ms[w], 50),
                  Pct(unmount_ms[w], 50));
    std::cout << buf;
  }
  double staged = Pct(pair_ms["staged"], 50), fresh = Pct(pair_ms["mount -t nfs"], 50),
         unstaged = Pct(pair_ms["unstaged"], 50);
  std::snprintf(buf, sizeof buf,
                "\nratio (pair p50): mount -t nfs / staged = %.2f; unstaged / staged = %.2f; mount -t nfs / unstaged = "
                "%.2f\n",
                staged > 0 ? fresh / staged : 0, staged > 0 ? unstaged / staged : 0, unstaged > 0 ? fresh / unstaged : 0);
  std::cout << buf;
  return 0;
}
