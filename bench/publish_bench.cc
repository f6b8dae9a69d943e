// publish_bench: latency and throughput of Publish+Unpublish through a real
// nodevold, against the same bind mounts made directly with mount(2).
//
// Must run as root (real mounts). It starts its own nodevold in a temporary
// sandbox (pods root, state dir, a dir pool, socket), creates one volume per
// client, then for each concurrency level measures pairs -- Publish a volume
// into a fresh pod volume directory, then Unpublish it -- with one thread and
// one gRPC channel per client. Baselines, same levels and target layout:
//   raw          mount(2) MS_BIND (+ MS_REMOUNT|MS_RDONLY with --read-only)
//                and umount2(2), nothing else;
//   raw+state    the same syscalls plus the records a straightforward
//                record keeper writes for a pair, as nodevold did until
//                2026-11-28: the whole publication record written three
//                times (publishing, published, unpublishing; each a temp
//                file renamed over it, no fsync, as nodevold writes
//                publication records) and removed. nodevold now writes it
//                once and renames it twice (state/store.h).
// The same pairs also go through nodevold's CSI socket (NodePublishVolume
// and NodeUnpublishVolume at kubelet's CSI path, .../kubernetes.io~csi/
// <pv>/mount, which the driver makes and removes), when the daemon serves it.
// It also samples the daemon's VmRSS/VmHWM (idle and under load), times a
// GetInfo round trip (the gRPC floor), and prints Markdown tables.
//
//   sudo build/bench/publish_bench [--iterations=N|N1,N8,N64] [--clients=1,8,64]
//                                  [--log-level=warn|info] [--nodevold=PATH] ...
// See --help.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include "bench_util.h"
#include "spawn_daemon.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <latch>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <set>
#include <thread>
#include <vector>

#include "mount/mount_table.h"
#include "node/volume.h"
#include "csi/v1/csi.grpc.pb.h"
#include "nodevol/v1/node.grpc.pb.h"
#include "base/atomic_file.h"
#include "state/records_json.h"
#include "state/store.h"

extern char** environ;

namespace {

using namespace bench;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;
namespace v1 = nodevol::v1;

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

// ------------------------------------------------------------------ options

struct Options {
  std::string nodevold = NODEVOLD_PATH;
  std::string log_level = "warn";
  std::vector<int> clients = {1, 8, 64};
  std::vector<int> iterations = {1000, 400, 50};  // per client, per level
  int warmup = 20;                              // untimed pairs per mode before the first level
  int rounds = 1;                               // times the levels run; the tables show the first
  int getinfo_calls = 300;
  std::string work_dir = "/tmp";
  bool read_only = false;
  bool state_baseline = true;
  bool keep_sandbox = false;
};

const char* kUsage =
    "Usage: publish_bench [options]   (as root)\n"
    "\n"
    "Measures Publish+Unpublish pairs through a private nodevold against raw\n"
    "mount(2)/umount2(2) bind mounts, at several client concurrencies.\n"
    "\n"
    "  --nodevold=PATH       nodevold binary (default: " NODEVOLD_PATH ")\n"
    "  --log-level=LEVEL     daemon log level: warn (default), info, debug, ...\n"
    "                        at info or below, handler times are read from its log\n"
    "  --clients=LIST        concurrency levels, comma-separated (default 1,8,64)\n"
    "  --iterations=N|LIST   pairs per client: one number for every level, or one\n"
    "                        per level (default 1000,400,50)\n"
    "  --warmup=N            untimed pairs per mode before measuring (default 20)\n"
    "  --rounds=N            run the levels N times (default 1): the tables show the\n"
    "                        first; nodevold's idle memory is read after each, to\n"
    "                        show whether repeated loads make it grow\n"
    "  --getinfo-calls=N     GetInfo round trips timed at 1 client (default 300)\n"
    "  --work-dir=DIR        where the sandbox is created (default /tmp); its\n"
    "                        filesystem decides what an fsync costs\n"
    "  --read-only           publish read-only (raw: MS_BIND then MS_REMOUNT|MS_RDONLY)\n"
    "  --no-state-baseline   skip the raw+state baseline\n"
    "  --keep-sandbox        do not remove the sandbox (mounts are always removed)\n";

bool ParseIntList(const std::string& s, std::vector<int>* out) {
  out->clear();
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v <= 0 || v > 100000) return false;
    out->push_back(static_cast<int>(v));
  }
  return !out->empty();
}

bool ParseOptions(int argc, char** argv, Options* o) {
  std::optional<std::vector<int>> iters;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string key = a, val;
    size_t eq = a.find('=');
    if (eq != std::string::npos) {
      key = a.substr(0, eq);
      val = a.substr(eq + 1);
    }
    auto need = [&]() -> bool {
      if (eq != std::string::npos) return true;
      if (i + 1 >= argc) return false;
      val = argv[++i];
      return true;
    };
    if (key == "--help" || key == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (key == "--nodevold" && need()) {
      o->nodevold = val;
    } else if (key == "--log-level" && need()) {
      o->log_level = val;
    } else if (key == "--clients" && need()) {
      if (!ParseIntList(val, &o->clients)) return false;
    } else if (key == "--iterations" && need()) {
      std::vector<int> v;
      if (!ParseIntList(val, &v)) return false;
      iters = v;
    } else if (key == "--warmup" && need()) {
      o->warmup = std::atoi(val.c_str());
    } else if (key == "--rounds" && need()) {
      o->rounds = std::max(1, std::atoi(val.c_str()));
    } else if (key == "--getinfo-calls" && need()) {
      o->getinfo_calls = std::max(1, std::atoi(val.c_str()));
    } else if (key == "--work-dir" && need()) {
      o->work_dir = val;
    } else if (key == "--read-only") {
      o->read_only = true;
    } else if (key == "--no-state-baseline") {
      o->state_baseline = false;
    } else if (key == "--keep-sandbox") {
      o->keep_sandbox = true;
    } else {
      std::fprintf(stderr, "publish_bench: unknown or incomplete option \"%s\"\n", a.c_str());
      return false;
    }
  }
  if (iters) {
    if (iters->size() == 1) {
      o->iterations.assign(o->clients.size(), iters->front());
    } else if (iters->size() == o->clients.size()) {
      o->iterations = *iters;
    } else {
      std::fprintf(stderr, "publish_bench: --iterations needs one number or one per --clients level\n");
      return false;
    }
  } else if (o->iterations.size() != o->clients.size()) {
    // Custom levels without iterations: keep the default budget of 1000
    // pairs at one client, about 3200 pairs per level otherwise.
    std::vector<int> v;
    for (int c : o->clients) v.push_back(c == 1 ? 1000 : std::max(5, 3200 / c));
    o->iterations = v;
  }
  return true;
}

// ------------------------------------------------------------------ helpers

std::unique_ptr<v1::Node::Stub> NewStub(const std::string& socket) {
  grpc::ChannelArguments args;
  // A channel of its own per client: no sharing of the connection through
  // gRPC's global subchannel pool.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
  return v1::Node::NewStub(grpc::CreateCustomChannel("unix:" + socket, grpc::InsecureChannelCredentials(), args));
}

void SetDeadline(grpc::ClientContext* ctx, int seconds) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
}

// ------------------------------------------------------------------ sandbox and daemon

struct Sandbox {
  std::string root, pods, state, pool, socket, log, conf, raw_state;
  std::string csi_socket;  // <pods>/../plugins/nodevol.io/csi.sock
  pid_t pid = -1;
  std::unique_ptr<v1::Node::Stub> stub;
};

bool StartDaemon(const Options& o, Sandbox* sb, std::string* err) {
  std::ofstream(sb->conf, std::ios::app).close();
  std::vector<std::string> argv = {o.nodevold,
                                   "--config=" + sb->conf,
                                   "--node-name=publish-bench",
                                   "--socket=" + sb->socket,
                                   "--state-dir=" + sb->state,
                                   "--pods-root=" + sb->pods,
                                   "--pool=name=default,backend=dir,path=" + sb->pool,
                                   "--metrics-address=off",
                                   "--log-target=stderr",
                                   "--log-level=" + o.log_level};
  int rc = SpawnDaemon(argv, sb->log, &sb->pid);
  if (rc != 0) {
    sb->pid = -1;
    *err = "cannot start " + o.nodevold + ": " + std::strerror(rc);
    return false;
  }
  sb->stub = NewStub(sb->socket);
  auto until = Clock::now() + std::chrono::seconds(15);
  while (Clock::now() < until && !g_stop) {
    int status = 0;
    if (waitpid(sb->pid, &status, WNOHANG) == sb->pid) {
      sb->pid = -1;
      *err = "nodevold exited during start:\n" + ReadFile(sb->log);
      return false;
    }
    if (access(sb->socket.c_str(), F_OK) == 0) {
      grpc::ClientContext ctx;
      SetDeadline(&ctx, 1);
      ctx.set_wait_for_ready(true);
      v1::GetInfoResponse resp;
      if (sb->stub->GetInfo(&ctx, v1::GetInfoRequest(), &resp).ok()) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  *err = "nodevold did not answer within 15 s:\n" + ReadFile(sb->log);
  return false;
}

int StopDaemon(Sandbox* sb) {
  if (sb->pid <= 0) return -1;
  sb->stub.reset();
  kill(sb->pid, SIGTERM);
  int status = 0;
  auto until = Clock::now() + std::chrono::seconds(20);
  while (waitpid(sb->pid, &status, WNOHANG) == 0) {
    if (Clock::now() > until) {
      std::fprintf(stderr, "publish_bench: nodevold ignored SIGTERM for 20 s; killing it\n");
      kill(sb->pid, SIGKILL);
      waitpid(sb->pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  sb->pid = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Unmounts everything at or below dir, deepest first; returns how many
// mounts are left.
int UnmountBelow(const std::string& dir) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    nodevol::MountTable table;
    if (!table.Load().ok()) return -1;
    auto below = table.Below(dir);
    bool self = table.FindTarget(dir) != nullptr;
    if (below.empty() && !self) return 0;
    for (auto it = below.rbegin(); it != below.rend(); ++it) ::umount2((*it)->target.c_str(), MNT_DETACH);
    if (self) ::umount2(dir.c_str(), MNT_DETACH);
  }
  nodevol::MountTable table;
  if (!table.Load().ok()) return -1;
  return static_cast<int>(table.Below(dir).size()) + (table.FindTarget(dir) ? 1 : 0);
}

// ------------------------------------------------------------------ the measurement

enum class Mode { kDaemon, kCsi, kRaw, kRawState };

const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kDaemon: return "nodevold";
    case Mode::kCsi: return "nodevold CSI";
    case Mode::kRaw: return "raw";
    case Mode::kRawState: return "raw+state";
  }
  return "?";
}

const char* ModeTag(Mode m) {
  switch (m) {
    case Mode::kDaemon: return "d";
    case Mode::kCsi: return "c";
    case Mode::kRaw: return "r";
    case Mode::kRawState: return "s";
  }
  return "?";
}

struct Vol {
  std::string name;
  std::string source;  // the volume's directory (bind source)
};

struct LevelResult {
  Mode mode;
  int clients = 0;
  int iterations = 0;
  size_t pairs = 0;
  double wall_s = 0;
  std::vector<double> pair_us, pub_us, unpub_us;  // sorted
  std::string error;
  long peak_rss_kb = 0;  // daemon only: max sampled VmRSS during the level
  long threads_before = 0, peak_threads = 0, threads_made = 0;  // daemon only
  long hwm_kb = 0;       // daemon only: VmHWM right after the level
  double cpu_s = 0;      // CPU time used by the daemon (nodevold) or this process (baselines) during the level
  std::vector<double> handler_pub_us, handler_unpub_us;  // from the daemon log (info level)
  double throughput() const { return wall_s > 0 ? pairs / wall_s : 0; }
};

struct Ctx {
  const Options* o;
  Sandbox* sb;
  std::vector<Vol> vols;
  nodevol::Store* raw_store = nullptr;
  int level_seq = 0;
};

std::string TargetFor(const Ctx& c, Mode m, int level, int client, int iter) {
  char uid[96];
  std::snprintf(uid, sizeof uid, "%s%d-c%02d-i%05d", ModeTag(m), level, client, iter);
  if (m == Mode::kCsi) return c.sb->pods + "/" + uid + "/volumes/kubernetes.io~csi/" + c.vols[client].name + "/mount";
  return c.sb->pods + "/" + uid + "/volumes/nodevol.io~volume/" + c.vols[client].name;
}

// The directory kubelet makes before publishing: the target itself, or
// for CSI the one above it (the driver makes the target).
std::string KubeletMadeDir(const std::string& target, Mode m) {
  return m == Mode::kCsi ? fs::path(target).parent_path().string() : target;
}

bool IsMountRoot(const std::string& path) {
  struct statx stx;
  return ::statx(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW, 0, &stx) == 0 &&
         (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
}

// One pair; fills the two latencies (µs). Returns an error message or "".
// With verify (warm-up only, untimed) it checks that the target really was
// a mount point after publishing and is none after unpublishing.
std::string OnePair(Ctx& c, Mode m, v1::Node::Stub* stub, ::csi::v1::Node::Stub* csi, int client,
                    const std::string& target, double* pub_us, double* unpub_us, bool verify) {
  const Vol& vol = c.vols[client];
  bool ro = c.o->read_only;
  auto t0 = Clock::now();
  Clock::time_point t1;
  auto check = [&](bool want) -> std::string {
    if (!verify || IsMountRoot(target) == want) return "";
    return target + (want ? " is not a mount point after publishing" : " is still a mount point after unpublishing");
  };
  std::string bad;
  switch (m) {
    case Mode::kDaemon: {
      {
        grpc::ClientContext ctx;
        SetDeadline(&ctx, 60);
        v1::PublishRequest req;
        req.set_volume(vol.name);
        req.set_target(target);
        req.set_read_only(ro);
        v1::PublishResponse resp;
        grpc::Status st = stub->Publish(&ctx, req, &resp);
        if (!st.ok()) return "Publish " + target + ": " + st.error_message();
      }
      if (bad = check(true); !bad.empty()) return bad;
      t1 = Clock::now();
      {
        grpc::ClientContext ctx;
        SetDeadline(&ctx, 60);
        v1::UnpublishRequest req;
        req.set_target(target);
        v1::UnpublishResponse resp;
        grpc::Status st = stub->Unpublish(&ctx, req, &resp);
        if (!st.ok()) return "Unpublish " + target + ": " + st.error_message();
        if (!resp.was_published()) return "Unpublish " + target + ": was_published = false";
      }
      if (bad = check(false); !bad.empty()) return bad;
      break;
    }
    case Mode::kCsi: {
      {
        grpc::ClientContext ctx;
        SetDeadline(&ctx, 60);
        ::csi::v1::NodePublishVolumeRequest req;
        req.set_volume_id(vol.name);
        req.set_target_path(target);
        req.set_readonly(ro);
        req.mutable_volume_capability()->mutable_mount();
        req.mutable_volume_capability()->mutable_access_mode()->set_mode(
            ::csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
        (*req.mutable_volume_context())["pool"] = "default";
        ::csi::v1::NodePublishVolumeResponse resp;
        grpc::Status st = csi->NodePublishVolume(&ctx, req, &resp);
        if (!st.ok()) return "NodePublishVolume " + target + ": " + st.error_message();
      }
      if (bad = check(true); !bad.empty()) return bad;
      t1 = Clock::now();
      {
        grpc::ClientContext ctx;
        SetDeadline(&ctx, 60);
        ::csi::v1::NodeUnpublishVolumeRequest req;
        req.set_volume_id(vol.name);
        req.set_target_path(target);
        ::csi::v1::NodeUnpublishVolumeResponse resp;
        grpc::Status st = csi->NodeUnpublishVolume(&ctx, req, &resp);
        if (!st.ok()) return "NodeUnpublishVolume " + target + ": " + st.error_message();
      }
      if (verify && fs::exists(target)) return target + " is still there after NodeUnpublishVolume";
      break;
    }
    case Mode::kRaw:
    case Mode::kRawState: {
      bool state = m == Mode::kRawState;
      nodevol::PublicationRecord rec;
      rec.target = target;
      rec.volume = vol.name;
      rec.source = vol.source;
      rec.read_only = ro;
      const std::string dir = c.raw_store->dir() + "/publications";
      const std::string file = std::to_string(std::hash<std::string>()(target)) + ".json";
      auto put = [&](nodevol::PublicationState s) {
        rec.state = s;
        return nodevol::WriteFileAtomic(dir, file, nodevol::PublicationToJson(rec), /*durable=*/false);
      };
      if (state) {
        if (auto st = put(nodevol::PublicationState::kPublishing); !st.ok()) return st.message();
      }
      if (::mount(vol.source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0)
        return "mount " + target + ": " + std::strerror(errno);
      if (ro && ::mount(nullptr, target.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0)
        return "remount ro " + target + ": " + std::strerror(errno);
      if (state) {
        if (auto st = put(nodevol::PublicationState::kPublished); !st.ok()) return st.message();
      }
      if (bad = check(true); !bad.empty()) return bad;
      t1 = Clock::now();
      if (state) {
        if (auto st = put(nodevol::PublicationState::kUnpublishing); !st.ok()) return st.message();
      }
      if (::umount2(target.c_str(), UMOUNT_NOFOLLOW) != 0) return "umount " + target + ": " + std::strerror(errno);
      if (state) {
        if (auto st = nodevol::RemoveFile(dir, file, /*durable=*/false); !st.ok()) return st.message();
      }
      if (bad = check(false); !bad.empty()) return bad;
      break;
    }
  }
  auto t2 = Clock::now();
  *pub_us = std::chrono::duration<double, std::micro>(t1 - t0).count();
  *unpub_us = std::chrono::duration<double, std::micro>(t2 - t1).count();
  return "";
}

// Parses "<Method> volume=... duration_ms=X outcome=OK" lines logged by
// nodevold at info level.
void ParseHandlerTimes(const std::string& text, std::vector<double>* pub, std::vector<double>* unpub) {
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    bool is_pub = line.find(" Publish volume=") != std::string::npos ||
                  line.find(" csi.NodePublishVolume volume=") != std::string::npos;
    bool is_unpub = line.find(" Unpublish volume=") != std::string::npos ||
                    line.find(" csi.NodeUnpublishVolume volume=") != std::string::npos;
    if (!is_pub && !is_unpub) continue;
    size_t d = line.find("duration_ms=");
    if (d == std::string::npos) continue;
    double ms = std::atof(line.c_str() + d + 12);
    (is_pub ? pub : unpub)->push_back(ms * 1000);
  }
  std::sort(pub->begin(), pub->end());
  std::sort(unpub->begin(), unpub->end());
}

bool LogsHandlerTimes(const std::string& level) {
  return level == "info" || level == "debug" || level == "trace";
}

LevelResult RunLevel(Ctx& c, Mode m, int clients, int iterations, bool timed = true) {
  LevelResult r;
  r.mode = m;
  r.clients = clients;
  r.iterations = iterations;
  int level = ++c.level_seq;

  // Fresh pod volume directories, made beforehand as kubelet does.
  for (int cl = 0; cl < clients; ++cl)
    for (int i = 0; i < iterations; ++i) {
      std::error_code ec;
      fs::create_directories(KubeletMadeDir(TargetFor(c, m, level, cl, i), m), ec);
      if (ec) {
        r.error = "mkdir: " + ec.message();
        return r;
      }
    }

  std::latch ready(clients);
  std::latch go(1);
  std::mutex mu;
  std::vector<Clock::time_point> ends(clients);
  std::vector<std::vector<double>> pub(clients), unpub(clients);
  std::vector<std::thread> threads;
  for (int cl = 0; cl < clients; ++cl) {
    threads.emplace_back([&, cl] {
      std::unique_ptr<v1::Node::Stub> stub;
      std::unique_ptr<::csi::v1::Node::Stub> csi;
      std::string err;
      if (m == Mode::kCsi) {
        grpc::ChannelArguments args;
        args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
        csi = ::csi::v1::Node::NewStub(
            grpc::CreateCustomChannel("unix:" + c.sb->csi_socket, grpc::InsecureChannelCredentials(), args));
        grpc::ClientContext ctx;
        SetDeadline(&ctx, 10);
        ctx.set_wait_for_ready(true);
        ::csi::v1::NodeGetCapabilitiesResponse resp;
        grpc::Status st = csi->NodeGetCapabilities(&ctx, ::csi::v1::NodeGetCapabilitiesRequest(), &resp);
        if (!st.ok()) err = "NodeGetCapabilities: " + st.error_message();
      }
      if (m == Mode::kDaemon) {
        // Connect (and warm) this client's channel before the clock starts.
        stub = NewStub(c.sb->socket);
        grpc::ClientContext ctx;
        SetDeadline(&ctx, 10);
        ctx.set_wait_for_ready(true);
        v1::GetInfoResponse resp;
        grpc::Status st = stub->GetInfo(&ctx, v1::GetInfoRequest(), &resp);
        if (!st.ok()) err = "GetInfo: " + st.error_message();
      }
      pub[cl].reserve(iterations);
      unpub[cl].reserve(iterations);
      ready.count_down();
      go.wait();
      for (int i = 0; i < iterations && err.empty() && !g_stop; ++i) {
        double p = 0, u = 0;
        err = OnePair(c, m, stub.get(), csi.get(), cl, TargetFor(c, m, level, cl, i), &p, &u, /*verify=*/!timed);
        if (err.empty()) {
          pub[cl].push_back(p);
          unpub[cl].push_back(u);
        }
      }
      ends[cl] = Clock::now();
      if (!err.empty()) {
        std::lock_guard<std::mutex> l(mu);
        if (r.error.empty()) r.error = err;
        g_stop = true;  // one failure ends the run
      }
    });
  }

  // Memory sampler (daemon mode only).
  std::atomic<bool> sampling{true};
  std::atomic<long> peak{0};
  std::thread sampler;
  size_t log_offset = 0;
  const bool daemon = m == Mode::kDaemon || m == Mode::kCsi;
  pid_t cpu_pid = daemon ? c.sb->pid : ::getpid();
  double cpu0 = CpuSeconds(cpu_pid);
  if (daemon && timed) {
    std::error_code ec;
    log_offset = fs::file_size(c.sb->log, ec);
    if (ec) log_offset = 0;
    pid_t pid = c.sb->pid;
    sampler = std::thread([&, pid] {
      const std::string task = "/proc/" + std::to_string(pid) + "/task";
      std::set<std::string> before, seen;
      std::error_code dec;
      for (const auto& e : fs::directory_iterator(task, dec)) before.insert(e.path().filename().string());
      while (sampling) {
        long rss = ReadMem(pid).rss_kb;
        if (rss > peak) peak = rss;
        // Threads of the daemon: at most how many at once, and how many
        // came and went (a thread living less than 5 ms may be missed).
        size_t now = 0;
        for (const auto& e : fs::directory_iterator(task, dec)) {
          ++now;
          std::string tid = e.path().filename().string();
          if (!before.count(tid)) seen.insert(tid);
        }
        r.peak_threads = std::max<long>(r.peak_threads, static_cast<long>(now));
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      r.threads_before = static_cast<long>(before.size());
      r.threads_made = static_cast<long>(seen.size());
    });
  }

  ready.wait();
  auto start = Clock::now();
  go.count_down();
  for (std::thread& t : threads) t.join();
  auto end = *std::max_element(ends.begin(), ends.end());
  sampling = false;
  if (sampler.joinable()) sampler.join();
  r.cpu_s = CpuSeconds(cpu_pid) - cpu0;

  r.wall_s = std::chrono::duration<double>(end - start).count();
  for (int cl = 0; cl < clients; ++cl) {
    for (size_t i = 0; i < pub[cl].size(); ++i) {
      r.pub_us.push_back(pub[cl][i]);
      r.unpub_us.push_back(unpub[cl][i]);
      r.pair_us.push_back(pub[cl][i] + unpub[cl][i]);
    }
  }
  r.pairs = r.pair_us.size();
  std::sort(r.pair_us.begin(), r.pair_us.end());
  std::sort(r.pub_us.begin(), r.pub_us.end());
  std::sort(r.unpub_us.begin(), r.unpub_us.end());
  if (daemon && timed) {
    r.peak_rss_kb = peak;
    r.hwm_kb = ReadMem(c.sb->pid).hwm_kb;
    if (LogsHandlerTimes(c.o->log_level)) {
      std::ifstream in(c.sb->log);
      in.seekg(static_cast<std::streamoff>(log_offset));
      std::string text((std::istreambuf_iterator<char>(in)), {});
      ParseHandlerTimes(text, &r.handler_pub_us, &r.handler_unpub_us);
    }
  }

  // Drop this level's pod directories, after unmounting anything a failure
  // left (nothing else is mounted below the pods root between levels).
  if (UnmountBelow(c.sb->pods) != 0) {
    if (r.error.empty()) r.error = "mounts remain below " + c.sb->pods;
    return r;
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(c.sb->pods, ec)) fs::remove_all(e.path(), ec);
  return r;
}

// ------------------------------------------------------------------ report

struct Report {
  std::vector<LevelResult> results;
  Mem idle_start, idle_volumes;
  std::vector<Mem> idle_after;  // after each round of the levels
  std::vector<double> getinfo_us;  // sorted
  std::string version, load_start, load_end, fstype, kernel, machine;
  double total_s = 0;
};

const LevelResult* Find(const Report& rep, Mode m, int clients) {
  for (const LevelResult& r : rep.results)
    if (r.mode == m && r.clients == clients) return &r;
  return nullptr;
}

void PrintReport(const Options& o, const Report& rep) {
  std::ostringstream out;
  out << "\n## Machine\n\n";
  out << "| | |\n|---|---|\n";
  out << "| CPU | " << CpuModel() << " |\n";
  out << "| nproc | " << sysconf(_SC_NPROCESSORS_ONLN) << " |\n";
  out << "| memory | " << MemTotal() << " |\n";
  out << "| kernel | " << rep.kernel << " (" << rep.machine << ") |\n";
  out << "| sandbox filesystem | " << rep.fstype << " (" << o.work_dir << ") |\n";
  out << "| nodevold | " << rep.version << ", --log-level=" << o.log_level << " |\n";
  out << "| gRPC | " << grpc::Version() << " |\n";
  out << "| load average (start / end) | " << rep.load_start << " / " << rep.load_end << " |\n";
  out << "| publish mode | " << (o.read_only ? "read-only" : "read-write") << " |\n";
  out << "| run time | " << Fixed(rep.total_s, 1) << " s |\n";

  out << "\n## Publish+Unpublish latency and throughput\n\n";
  out << "Latencies in ms (client side, per pair and per call); throughput in pairs/s "
         "over all clients; CPU ms/pair: user+system CPU of nodevold (nodevold rows) or of "
         "the bench process making the syscalls itself (raw rows) during the level.\n\n";
  out << "| mode | clients | pairs | pair p50 | pair p99 | Publish p50 | Publish p99 | Unpublish p50 | "
         "Unpublish p99 | pairs/s | CPU ms/pair |\n";
  out << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (int cl : o.clients)
    for (Mode m : {Mode::kDaemon, Mode::kCsi, Mode::kRaw, Mode::kRawState}) {
      const LevelResult* r = Find(rep, m, cl);
      if (!r || r->pairs == 0) continue;
      out << "| " << ModeName(m) << " | " << cl << " | " << r->pairs << " | " << Ms(Pct(r->pair_us, 50)) << " | "
          << Ms(Pct(r->pair_us, 99)) << " | " << Ms(Pct(r->pub_us, 50)) << " | " << Ms(Pct(r->pub_us, 99))
          << " | " << Ms(Pct(r->unpub_us, 50)) << " | " << Ms(Pct(r->unpub_us, 99)) << " | "
          << Fixed(r->throughput(), 0) << " | " << Fixed(r->cpu_s * 1000 / r->pairs, 3) << " |\n";
    }

  out << "\n## nodevold against raw mount(2)\n\n";
  out << "| clients | pair p50 nodevold / raw | added p50 (ms) | pairs/s nodevold / raw | added p50 through CSI (ms) |";
  if (o.state_baseline) out << " added p50 over raw+state (ms) |";
  out << "\n|---:|---:|---:|---:|---:|";
  if (o.state_baseline) out << "---:|";
  out << "\n";
  for (int cl : o.clients) {
    const LevelResult* d = Find(rep, Mode::kDaemon, cl);
    const LevelResult* r = Find(rep, Mode::kRaw, cl);
    if (!d || !r || d->pairs == 0 || r->pairs == 0) continue;
    double dp = Pct(d->pair_us, 50), rp = Pct(r->pair_us, 50);
    out << "| " << cl << " | " << Fixed(dp / rp, 1) << "x | " << Ms(dp - rp) << " | "
        << Fixed(d->throughput() / r->throughput(), 3) << "x |";
    const LevelResult* csi = Find(rep, Mode::kCsi, cl);
    if (csi && csi->pairs) out << " " << Ms(Pct(csi->pair_us, 50) - rp) << " |";
    else out << " - |";
    if (o.state_baseline) {
      const LevelResult* s = Find(rep, Mode::kRawState, cl);
      if (s && s->pairs) out << " " << Ms(dp - Pct(s->pair_us, 50)) << " |";
      else out << " - |";
    }
    out << "\n";
  }
  if (!rep.getinfo_us.empty())
    out << "\ngRPC floor: GetInfo round trip at 1 client, p50 " << Ms(Pct(rep.getinfo_us, 50)) << " ms, p99 "
        << Ms(Pct(rep.getinfo_us, 99)) << " ms (" << rep.getinfo_us.size() << " calls).\n";

  bool handler = false;
  for (const LevelResult& r : rep.results) handler |= !r.handler_pub_us.empty();
  if (handler) {
    out << "\n## nodevold handler time (from its info log)\n\n";
    out << "| clients | Publish p50 | Publish p99 | Unpublish p50 | Unpublish p99 |\n|---:|---:|---:|---:|---:|\n";
    for (int cl : o.clients) {
      const LevelResult* d = Find(rep, Mode::kDaemon, cl);
      if (!d || d->handler_pub_us.empty()) continue;
      out << "| " << cl << " | " << Ms(Pct(d->handler_pub_us, 50)) << " | " << Ms(Pct(d->handler_pub_us, 99))
          << " | " << Ms(Pct(d->handler_unpub_us, 50)) << " | " << Ms(Pct(d->handler_unpub_us, 99)) << " |\n";
    }
  }

  out << "\n## nodevold memory\n\n";
  auto row = [&](const Mem& m) {
    out << Mb(m.rss_kb) << " | " << Mb(m.hwm_kb) << " | " << Mb(m.anon_kb) << " | " << Mb(m.file_kb) << " | "
        << Mb(m.pss_kb) << " |\n";
  };
  out << "| when | VmRSS | VmHWM | RssAnon | RssFile | Pss |\n|---|---:|---:|---:|---:|---:|\n";
  out << "| idle after start | ";
  row(rep.idle_start);
  out << "| idle, " << *std::max_element(o.clients.begin(), o.clients.end()) << " volumes created | ";
  row(rep.idle_volumes);
  for (int cl : o.clients) {
    const LevelResult* d = Find(rep, Mode::kDaemon, cl);
    if (!d || d->pairs == 0) continue;
    out << "| peak under " << cl << (cl == 1 ? " client" : " clients") << " (VmRSS sampled every 5 ms; VmHWM after) | " << Mb(d->peak_rss_kb)
        << " | " << Mb(d->hwm_kb) << " | | | |\n";
  }
  for (size_t i = 0; i < rep.idle_after.size(); ++i) {
    out << "| idle after the load" << (rep.idle_after.size() > 1 ? ", round " + std::to_string(i + 1) : "") << " | ";
    row(rep.idle_after[i]);
  }

  out << "\n## nodevold threads\n\nSampled every 5 ms during each level: threads before it, most at once, and "
         "threads that appeared during it (made and, all but a few, ended again).\n\n"
         "| mode | clients | before | most at once | made during the level |\n|---|---:|---:|---:|---:|\n";
  for (const LevelResult& l : rep.results) {
    if (l.peak_threads == 0) continue;
    out << "| " << (l.mode == Mode::kCsi ? "nodevold CSI" : "nodevold") << " | " << l.clients << " | "
        << l.threads_before << " | " << l.peak_threads << " | " << l.threads_made << " |\n";
  }

  out << "\n## Goals\n\n";
  const LevelResult* d1 = Find(rep, Mode::kDaemon, 1);
  const LevelResult* r1 = Find(rep, Mode::kRaw, 1);
  if (d1 && r1 && d1->pairs && r1->pairs) {
    double added = Pct(d1->pair_us, 50) - Pct(r1->pair_us, 50);
    out << "- nodevold adds < 1 ms p50 over raw syscalls at 1 client: added " << Ms(added) << " ms -> "
        << (added < 1000 ? "MET" : "MISSED") << "\n";
    const LevelResult* c1 = Find(rep, Mode::kCsi, 1);
    if (c1 && c1->pairs) {
      double csi_added = Pct(c1->pair_us, 50) - Pct(r1->pair_us, 50);
      out << "- through CSI too: added " << Ms(csi_added) << " ms -> " << (csi_added < 1000 ? "MET" : "MISSED")
          << "\n";
    }
  }
  out << "- idle RSS < 15 MB: " << Mb(rep.idle_start.rss_kb) << " (" << Fixed(rep.idle_start.rss_kb * 1024 / 1e6, 1)
      << " MB) -> " << (rep.idle_start.rss_kb * 1024 < 15e6 ? "MET" : "MISSED") << "\n";
  std::fputs(out.str().c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseOptions(argc, argv, &o)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  if (geteuid() != 0) {
    std::fprintf(stderr, "publish_bench: must run as root (it makes real mounts); try sudo\n");
    return 2;
  }
  if (access(o.nodevold.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "publish_bench: nodevold binary %s is not executable (--nodevold)\n", o.nodevold.c_str());
    return 2;
  }
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Report rep;
  rep.load_start = LoadAvg();
  struct utsname un;
  if (uname(&un) == 0) {
    rep.kernel = std::string(un.sysname) + " " + un.release;
    rep.machine = un.machine;
  }
  auto run_start = Clock::now();

  Sandbox sb;
  sb.root = MakeTempDir(o.work_dir, "nodevol-bench-");
  if (sb.root.empty()) {
    std::fprintf(stderr, "publish_bench: cannot make a directory in %s: %s\n", o.work_dir.c_str(), std::strerror(errno));
    return 1;
  }
  sb.pods = sb.root + "/pods";
  sb.state = sb.root + "/state";
  sb.pool = sb.root + "/pool";
  sb.socket = sb.root + "/nodevold.sock";
  sb.csi_socket = sb.root + "/plugins/nodevol.io/csi.sock";
  sb.log = sb.root + "/nodevold.log";
  sb.conf = sb.root + "/nodevold.conf";
  sb.raw_state = sb.root + "/raw-state";
  fs::create_directories(sb.pods);
  fs::create_directories(sb.pool);
  rep.fstype = FsType(sb.root);
  std::fprintf(stderr, "publish_bench: sandbox %s (%s)\n", sb.root.c_str(), rep.fstype.c_str());

  int rc = 0;
  std::string err;
  nodevol::Store raw_store(sb.raw_state);
  Ctx c;
  c.o = &o;
  c.sb = &sb;
  c.raw_store = &raw_store;
  auto fail = [&](const std::string& msg) {
    std::fprintf(stderr, "publish_bench: %s\n", msg.c_str());
    rc = 1;
  };

  do {
    if (!StartDaemon(o, &sb, &err)) {
      fail(err);
      break;
    }
    {
      grpc::ClientContext ctx;
      SetDeadline(&ctx, 10);
      v1::GetInfoResponse info;
      if (sb.stub->GetInfo(&ctx, v1::GetInfoRequest(), &info).ok()) rep.version = info.version();
    }
    std::fprintf(stderr, "publish_bench: nodevold %s running as pid %d\n", rep.version.c_str(), sb.pid);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    rep.idle_start = ReadMemDetailed(sb.pid);

    // One volume per client of the largest level.
    int max_clients = *std::max_element(o.clients.begin(), o.clients.end());
    for (int i = 0; i < max_clients && rc == 0; ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "bench-vol-%02d", i);
      grpc::ClientContext ctx;
      SetDeadline(&ctx, 30);
      v1::CreateVolumeRequest req;
      req.set_name(name);
      req.set_pool("default");
      req.set_size_bytes(1ull << 30);
      v1::CreateVolumeResponse resp;
      grpc::Status st = sb.stub->CreateVolume(&ctx, req, &resp);
      if (!st.ok()) {
        fail(std::string("CreateVolume ") + name + ": " + st.error_message());
        break;
      }
      auto it = resp.volume().attributes().find("path");
      if (it == resp.volume().attributes().end()) {
        fail(std::string("CreateVolume ") + name + ": no \"path\" attribute in the answer");
        break;
      }
      c.vols.push_back({name, it->second});
    }
    if (rc) break;
    if (o.state_baseline) {
      if (auto st = raw_store.Open(); !st.ok()) {
        fail("raw+state store: " + st.message());
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    rep.idle_volumes = ReadMemDetailed(sb.pid);

    // gRPC floor: GetInfo round trips on a fresh channel.
    {
      auto stub = NewStub(sb.socket);
      for (int i = 0; i < o.getinfo_calls + 20; ++i) {
        grpc::ClientContext ctx;
        SetDeadline(&ctx, 10);
        ctx.set_wait_for_ready(true);
        v1::GetInfoResponse resp;
        auto t0 = Clock::now();
        grpc::Status st = stub->GetInfo(&ctx, v1::GetInfoRequest(), &resp);
        double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
        if (!st.ok()) {
          fail("GetInfo: " + st.error_message());
          break;
        }
        if (i >= 20) rep.getinfo_us.push_back(us);
      }
      std::sort(rep.getinfo_us.begin(), rep.getinfo_us.end());
    }
    if (rc) break;

    std::vector<Mode> modes = {Mode::kDaemon, Mode::kRaw};
    // A --nodevold older than the CSI front door has no CSI socket.
    if (fs::exists(sb.csi_socket)) modes.insert(modes.begin() + 1, Mode::kCsi);
    else std::fprintf(stderr, "publish_bench: no CSI socket at %s; CSI not measured\n", sb.csi_socket.c_str());
    if (o.state_baseline) modes.push_back(Mode::kRawState);
    // Warm every path (page cache, dentries, gRPC threads) untimed.
    for (Mode m : modes) {
      if (o.warmup <= 0) break;
      LevelResult w = RunLevel(c, m, 1, o.warmup, /*timed=*/false);
      if (!w.error.empty()) {
        fail(std::string("warm-up ") + ModeName(m) + ": " + w.error);
        break;
      }
    }
    if (rc) break;

    // Modes alternate within each level, so that a change in background
    // load shows in all of them alike.
    for (int round = 0; round < o.rounds && rc == 0 && !g_stop; ++round) {
      for (size_t li = 0; li < o.clients.size() && rc == 0 && !g_stop; ++li) {
        for (Mode m : modes) {
          auto t0 = Clock::now();
          LevelResult r = RunLevel(c, m, o.clients[li], o.iterations[li]);
          double secs = std::chrono::duration<double>(Clock::now() - t0).count();
          if (!r.error.empty()) {
            fail(std::string(ModeName(m)) + " at " + std::to_string(o.clients[li]) + " clients: " + r.error);
            break;
          }
          if (g_stop) break;
          std::fprintf(stderr,
                       "publish_bench: round %d %-9s clients=%-3d pairs=%-5zu p50=%s ms  %.0f pairs/s  (%.1f s)\n",
                       round + 1, ModeName(m), r.clients, r.pairs, Ms(Pct(r.pair_us, 50)).c_str(), r.throughput(),
                       secs);
          if (round == 0) rep.results.push_back(std::move(r));
        }
      }
      if (rc || g_stop) break;
      std::this_thread::sleep_for(std::chrono::seconds(1));
      rep.idle_after.push_back(ReadMemDetailed(sb.pid));
    }
    if (rc || g_stop) break;
  } while (false);

  // Cleanup: stop the daemon, unmount what is left, remove the sandbox.
  if (sb.pid > 0) {
    int st = StopDaemon(&sb);
    if (st != 0) std::fprintf(stderr, "publish_bench: nodevold exited with status %d\n", st);
  }
  if (rc) std::fprintf(stderr, "---- nodevold log (%s) ----\n%s----\n", sb.log.c_str(), ReadFile(sb.log).c_str());
  int left = UnmountBelow(sb.root);
  if (left != 0) std::fprintf(stderr, "publish_bench: %d mounts could not be removed below %s\n", left, sb.root.c_str());
  if (o.keep_sandbox || left != 0) {
    std::fprintf(stderr, "publish_bench: sandbox kept at %s\n", sb.root.c_str());
  } else {
    std::error_code ec;
    fs::remove_all(sb.root, ec);
  }
  if (g_stop && rc == 0) {
    std::fprintf(stderr, "publish_bench: interrupted\n");
    return 130;
  }
  if (rc) return rc;

  rep.load_end = LoadAvg();
  rep.total_s = std::chrono::duration<double>(Clock::now() - run_start).count();
  PrintReport(o, rep);
  return 0;
}
