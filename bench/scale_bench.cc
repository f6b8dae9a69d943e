// scale_bench: one node with many volumes and publications (issue 18).
//
// Starts a real nodevold in a sandbox with one dir pool and grows it to
// --volumes volume records (default 10,000), then --publications of them
// (default 1,000) bind-mounted into pod volume directories, measuring at 0,
// at N volumes and at N volumes with P publications:
//   - memory (VmRSS, RssAnon, Pss) and RssAnon per volume record;
//   - GetInfo, GetCapacity and ListVolumes latency (and ListVolumes' size);
//   - a Publish+Unpublish pair of one more volume (what a pod start pays
//     for the node's other volumes and mounts);
//   - nodevold's CPU per capacity sample (--capacity-poll-ms=100, idle);
// then restarts nodevold --starts times and times each from exec to its
// first answered GetInfo: nodevold serves only once its start has checked
// every volume and publication (reconcile), so that is start-to-ready.
// Baseline for the start, same run: reading every record file of the state
// dir in one process (readdir, open, read), the floor of loading them.
// Then unpublishes and deletes everything (timed) and checks nothing is
// left mounted.
//
// Must run as root (real bind mounts). Not a test: the results go to
// docs/benchmarks.md.
//
//   sudo build/bench/scale_bench [--volumes=N] [--publications=P] [--starts=K]
//                                [--clients=C] [--nodevold=PATH] [--work-dir=DIR] [--keep]
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "bench_util.h"
#include "mount/mount_table.h"
#include "nodevol/v1/node.grpc.pb.h"
#include "spawn_daemon.h"

namespace {

using namespace bench;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;
namespace v1 = nodevol::v1;

struct Options {
  int volumes = 10000;
  int publications = 1000;
  int starts = 3;
  int clients = 4;
  int calls = 200;  // latency samples per call type
  std::string nodevold = NODEVOLD_PATH;
  std::string work_dir = "/var/tmp";
  bool keep = false;  // stop after the starts, leaving the sandbox (mounts too) for a profiler
};

bool ParseOptions(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    size_t eq = a.find('=');
    std::string key = a.substr(0, eq), val = eq == std::string::npos ? "" : a.substr(eq + 1);
    auto num = [&](int* out) {
      char* end = nullptr;
      long v = std::strtol(val.c_str(), &end, 10);
      if (val.empty() || *end || v < 0 || v > 1000000) return false;
      *out = static_cast<int>(v);
      return true;
    };
    bool ok = true;
    if (key == "--volumes") ok = num(&o->volumes);
    else if (key == "--publications") ok = num(&o->publications);
    else if (key == "--starts") ok = num(&o->starts);
    else if (key == "--clients") ok = num(&o->clients) && o->clients > 0;
    else if (key == "--calls") ok = num(&o->calls) && o->calls > 0;
    else if (key == "--nodevold" && !val.empty()) o->nodevold = val;
    else if (key == "--work-dir" && !val.empty()) o->work_dir = val;
    else if (key == "--keep" && val.empty()) o->keep = true;
    else {
      std::fprintf(stderr,
                   "usage: scale_bench [--volumes=N] [--publications=P] [--starts=K] [--clients=C] [--calls=M]\n"
                   "                   [--nodevold=PATH] [--work-dir=DIR] [--keep]\n");
      return false;
    }
    if (!ok) {
      std::fprintf(stderr, "scale_bench: bad value in %s\n", a.c_str());
      return false;
    }
  }
  if (o->publications > o->volumes) {
    std::fprintf(stderr, "scale_bench: --publications must not exceed --volumes\n");
    return false;
  }
  return true;
}

std::unique_ptr<v1::Node::Stub> NewStub(const std::string& socket) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 20);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 20);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 20);
  args.SetMaxReceiveMessageSize(-1);
  return v1::Node::NewStub(grpc::CreateCustomChannel("unix:" + socket, grpc::InsecureChannelCredentials(), args));
}

struct Sandbox {
  std::string root, pods, state, pool, socket, log;
  pid_t pid = -1;
};

std::string Name(int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "scale-%05d", i);
  return buf;
}

std::string Target(const Sandbox& sb, int i) {
  char uid[64];
  std::snprintf(uid, sizeof uid, "0000%04x-0000-4000-8000-%012d", i & 0xffff, i);
  return sb.pods + "/" + uid + "/volumes/nodevol.io~volume/data";
}

// Starts nodevold and waits for its first answered GetInfo; *ready_s: exec
// to that answer.
bool Start(const Options& o, Sandbox* sb, double* ready_s, std::string* err) {
  std::ofstream(sb->root + "/nodevold.conf", std::ios::app).close();
  std::vector<std::string> argv = {o.nodevold, "--config=" + sb->root + "/nodevold.conf", "--node-name=scale-bench",
                                   "--socket=" + sb->socket, "--state-dir=" + sb->state,
                                   "--pods-root=" + sb->pods, "--pool=name=default,backend=dir,path=" + sb->pool,
                                   "--metrics-address=off", "--csi=off", "--capacity-poll-ms=100",
                                   "--log-target=stderr", "--log-level=warn"};
  auto t0 = Clock::now();
  if (int rc = SpawnDaemon(argv, sb->log, &sb->pid); rc != 0) {
    *err = "cannot start " + o.nodevold + ": " + std::strerror(rc);
    return false;
  }
  while (Clock::now() - t0 < std::chrono::seconds(120)) {
    int status = 0;
    if (waitpid(sb->pid, &status, WNOHANG) == sb->pid) {
      sb->pid = -1;
      *err = "nodevold exited during start:\n" + ReadFile(sb->log);
      return false;
    }
    // A channel per attempt: one that failed to connect waits out gRPC's
    // reconnect backoff (seconds) before it tries again.
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    v1::GetInfoResponse resp;
    if (access(sb->socket.c_str(), F_OK) == 0 &&
        NewStub(sb->socket)->GetInfo(&ctx, v1::GetInfoRequest(), &resp).ok()) {
      *ready_s = std::chrono::duration<double>(Clock::now() - t0).count();
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  *err = "nodevold did not answer within 120 s";
  return false;
}

void Stop(Sandbox* sb) {
  if (sb->pid <= 0) return;
  kill(sb->pid, SIGTERM);
  int status = 0;
  waitpid(sb->pid, &status, 0);
  sb->pid = -1;
}

// Runs fn(i) for i in [0, n) on `clients` threads; the first error wins.
std::string Parallel(int n, int clients, const std::function<std::string(v1::Node::Stub*, int)>& fn,
                     const std::string& socket) {
  std::atomic<int> next{0};
  std::string first_error;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&] {
      auto stub = NewStub(socket);
      for (int i; (i = next++) < n;) {
        std::string e = fn(stub.get(), i);
        if (!e.empty()) {
          std::lock_guard<std::mutex> l(mu);
          if (first_error.empty()) first_error = e;
          next = n;
        }
      }
    });
  for (auto& t : threads) t.join();
  return first_error;
}

grpc::Status Publish(v1::Node::Stub* stub, const std::string& volume, const std::string& target) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::PublishRequest req;
  req.set_volume(volume);
  req.set_target(target);
  v1::PublishResponse resp;
  return stub->Publish(&ctx, req, &resp);
}

grpc::Status Unpublish(v1::Node::Stub* stub, const std::string& target) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::UnpublishRequest req;
  req.set_target(target);
  v1::UnpublishResponse resp;
  return stub->Unpublish(&ctx, req, &resp);
}

// Latencies of `calls` calls of fn, sorted, in µs; "" or the first error.
std::string Time(int calls, const std::function<grpc::Status()>& fn, std::vector<double>* us) {
  us->clear();
  for (int i = 0; i < calls; ++i) {
    auto t0 = Clock::now();
    grpc::Status st = fn();
    if (!st.ok()) return st.error_message();
    us->push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(us->begin(), us->end());
  return "";
}

// One column of the main table: the node at one size.
struct Point {
  std::string label;
  Mem mem;
  std::vector<double> getinfo, capacity, list, pair;
  size_t list_bytes = 0;
  double cpu_per_sample_ms = 0;
  size_t mounts = 0;
};

std::string Measure(const Options& o, Sandbox* sb, v1::Node::Stub* stub, Point* p) {
  p->mem = ReadMemDetailed(sb->pid);
  nodevol::MountTable mt;
  if (mt.Load().ok()) p->mounts = mt.entries().size();
  auto deadline = [](grpc::ClientContext* c) {
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  };
  std::string e = Time(o.calls, [&] {
    grpc::ClientContext c;
    deadline(&c);
    v1::GetInfoResponse r;
    return stub->GetInfo(&c, v1::GetInfoRequest(), &r);
  }, &p->getinfo);
  if (e.empty()) e = Time(o.calls, [&] {
    grpc::ClientContext c;
    deadline(&c);
    v1::GetCapacityResponse r;
    return stub->GetCapacity(&c, v1::GetCapacityRequest(), &r);
  }, &p->capacity);
  if (e.empty()) e = Time(std::max(5, o.calls / 10), [&] {
    grpc::ClientContext c;
    deadline(&c);
    v1::ListVolumesResponse r;
    grpc::Status st = stub->ListVolumes(&c, v1::ListVolumesRequest(), &r);
    p->list_bytes = r.ByteSizeLong();
    return st;
  }, &p->list);
  // One more volume's pair, into a pod of its own.
  std::string target = sb->pods + "/ffffffff-0000-4000-8000-000000000000/volumes/nodevol.io~volume/data";
  fs::create_directories(target);
  if (e.empty()) e = Time(o.calls, [&] {
    grpc::Status st = Publish(stub, "probe", target);
    return st.ok() ? Unpublish(stub, target) : st;
  }, &p->pair);
  if (!e.empty()) return e;
  // Idle CPU with a sample every 100 ms: nodevold's CPU per sample.
  double c0 = CpuSeconds(sb->pid);
  std::this_thread::sleep_for(std::chrono::seconds(5));
  p->cpu_per_sample_ms = (CpuSeconds(sb->pid) - c0) * 1000 / 50;
  return "";
}

// Reads every file of the state dir's record folders in one process: the
// floor of loading them.
double ReadRecordsByHand(const std::string& state, size_t* files) {
  auto t0 = Clock::now();
  *files = 0;
  char buf[16384];
  for (const char* sub : {"volumes", "publications", "snapshots"}) {
    std::string dir = state + "/" + sub;
    DIR* d = opendir(dir.c_str());
    if (!d) continue;
    while (struct dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      while (read(fd, buf, sizeof buf) > 0) {
      }
      close(fd);
      ++*files;
    }
    closedir(d);
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int UnmountBelow(const std::string& dir) {
  nodevol::MountTable table;
  if (!table.Load().ok()) return -1;
  auto below = table.Below(dir);
  for (auto it = below.rbegin(); it != below.rend(); ++it) ::umount2((*it)->target.c_str(), MNT_DETACH);
  return static_cast<int>(below.size());
}

std::string Row(const std::string& what, const std::vector<Point>& pts, const std::function<std::string(const Point&)>& f) {
  std::string r = "| " + what + " |";
  for (const Point& p : pts) r += " " + f(p) + " |";
  return r + "\n";
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseOptions(argc, argv, &o)) return 2;
  if (geteuid() != 0) {
    std::fprintf(stderr, "scale_bench: must run as root (real bind mounts)\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  Sandbox sb;
  sb.root = MakeTempDir(o.work_dir, "nodevol-scale-");
  if (sb.root.empty()) {
    std::fprintf(stderr, "scale_bench: cannot make a directory in %s: %s\n", o.work_dir.c_str(), std::strerror(errno));
    return 1;
  }
  sb.pods = sb.root + "/pods";
  sb.state = sb.root + "/state";
  sb.pool = sb.root + "/pool";
  sb.socket = sb.root + "/nodevold.sock";
  sb.log = sb.root + "/nodevold.log";
  fs::create_directories(sb.pods);
  fs::create_directories(sb.pool);
  std::string load_before = LoadAvg();
  std::fprintf(stderr, "scale_bench: sandbox %s (%s)\n", sb.root.c_str(), FsType(sb.root).c_str());

  std::vector<Point> points;
  std::vector<double> starts, start_cpu;
  std::vector<Mem> start_mem;
  double create_s = 0, publish_s = 0, unpublish_s = 0, delete_s = 0, by_hand_s = 0;
  size_t by_hand_files = 0;
  int left_mounted = -1;
  std::string err;
  auto step = [](const char* what) { std::fprintf(stderr, "scale_bench: %s\n", what); };
  do {
    double ready = 0;
    if (!Start(o, &sb, &ready, &err)) break;
    auto stub = NewStub(sb.socket);
    {
      grpc::ClientContext c;
      v1::CreateVolumeRequest req;
      req.set_name("probe");
      req.set_pool("default");
      req.set_size_bytes(1 << 20);
      v1::CreateVolumeResponse r;
      if (grpc::Status st = stub->CreateVolume(&c, req, &r); !st.ok()) {
        err = "CreateVolume probe: " + st.error_message();
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
    step("measuring the empty node");
    points.emplace_back();
    points.back().label = "1 volume";
    if (err = Measure(o, &sb, stub.get(), &points.back()); !err.empty()) break;

    step("creating volumes");
    auto t0 = Clock::now();
    err = Parallel(o.volumes, o.clients, [](v1::Node::Stub* s, int i) -> std::string {
      grpc::ClientContext c;
      c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      v1::CreateVolumeRequest req;
      req.set_name(Name(i));
      req.set_pool("default");
      req.set_size_bytes(1 << 20);
      v1::CreateVolumeResponse r;
      grpc::Status st = s->CreateVolume(&c, req, &r);
      return st.ok() ? "" : "CreateVolume " + Name(i) + ": " + st.error_message();
    }, sb.socket);
    create_s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!err.empty()) break;
    std::this_thread::sleep_for(std::chrono::seconds(1));
    step("measuring with every volume");
    points.emplace_back();
    points.back().label = std::to_string(o.volumes + 1) + " volumes";
    if (err = Measure(o, &sb, stub.get(), &points.back()); !err.empty()) break;

    step("publishing");
    for (int i = 0; i < o.publications; ++i) fs::create_directories(Target(sb, i));
    t0 = Clock::now();
    err = Parallel(o.publications, o.clients, [&](v1::Node::Stub* s, int i) -> std::string {
      grpc::Status st = Publish(s, Name(i), Target(sb, i));
      return st.ok() ? "" : "Publish " + Name(i) + ": " + st.error_message();
    }, sb.socket);
    publish_s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!err.empty()) break;
    std::this_thread::sleep_for(std::chrono::seconds(1));
    step("measuring with the publications");
    points.emplace_back();
    points.back().label = std::to_string(o.volumes + 1) + " volumes, " + std::to_string(o.publications) + " published";
    if (err = Measure(o, &sb, stub.get(), &points.back()); !err.empty()) break;

    stub.reset();
    for (int k = 0; k < o.starts; ++k) {
      step("restarting");
      Stop(&sb);
      // Drop what the kernel caches of the state dir? No: a restart on a
      // node finds it cached as well; the by-hand floor is read warm too.
      if (!Start(o, &sb, &ready, &err)) break;
      starts.push_back(ready);
      start_cpu.push_back(CpuSeconds(sb.pid));
      start_mem.push_back(ReadMem(sb.pid));
    }
    if (!err.empty()) break;
    by_hand_s = ReadRecordsByHand(sb.state, &by_hand_files);
    if (o.keep) {
      Stop(&sb);
      std::fprintf(stderr, "scale_bench: --keep: stopped after the starts; sandbox, state and mounts left in %s\n",
                   sb.root.c_str());
      return 0;
    }

    step("unpublishing and deleting");
    t0 = Clock::now();
    err = Parallel(o.publications, o.clients, [&](v1::Node::Stub* s, int i) -> std::string {
      grpc::Status st = Unpublish(s, Target(sb, i));
      return st.ok() ? "" : "Unpublish " + Target(sb, i) + ": " + st.error_message();
    }, sb.socket);
    unpublish_s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!err.empty()) break;
    t0 = Clock::now();
    err = Parallel(o.volumes, o.clients, [](v1::Node::Stub* s, int i) -> std::string {
      grpc::ClientContext c;
      c.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      v1::DeleteVolumeRequest req;
      req.set_name(Name(i));
      v1::DeleteVolumeResponse r;
      grpc::Status st = s->DeleteVolume(&c, req, &r);
      return st.ok() ? "" : "DeleteVolume " + Name(i) + ": " + st.error_message();
    }, sb.socket);
    delete_s = std::chrono::duration<double>(Clock::now() - t0).count();
  } while (false);
  Stop(&sb);
  left_mounted = UnmountBelow(sb.root);
  if (!err.empty()) {
    std::fprintf(stderr, "scale_bench: %s\n(sandbox and log kept: %s)\n", err.c_str(), sb.root.c_str());
    return 1;
  }
  fs::remove_all(sb.root);

  struct utsname un;
  uname(&un);
  std::printf("### scale_bench: %d volumes, %d published (%s, %s, %s)\n\n", o.volumes, o.publications,
              un.release, CpuModel().c_str(), MemTotal().c_str());
  std::printf("Load average before: %s; state dir on %s; %d clients for creates, publishes and deletes.\n\n",
              load_before.c_str(), FsType(o.work_dir).c_str(), o.clients);
  std::string head = "| |", rule = "|---|";
  for (const Point& p : points) {
    head += " " + p.label + " |";
    rule += "---:|";
  }
  std::printf("%s\n%s\n", head.c_str(), rule.c_str());
  auto lat = [](const std::vector<double>& v) { return Ms(Pct(v, 50)) + " / " + Ms(Pct(v, 99)); };
  std::string t;
  t += Row("mounts on the node", points, [](const Point& p) { return std::to_string(p.mounts); });
  t += Row("VmRSS", points, [](const Point& p) { return Mb(p.mem.rss_kb); });
  t += Row("RssAnon", points, [](const Point& p) { return Mb(p.mem.anon_kb); });
  t += Row("Pss", points, [](const Point& p) { return Mb(p.mem.pss_kb); });
  t += Row("GetInfo p50 / p99 (ms)", points, [&](const Point& p) { return lat(p.getinfo); });
  t += Row("GetCapacity p50 / p99 (ms)", points, [&](const Point& p) { return lat(p.capacity); });
  t += Row("ListVolumes p50 / p99 (ms)", points, [&](const Point& p) { return lat(p.list); });
  t += Row("ListVolumes answer", points, [](const Point& p) { return Fixed(p.list_bytes / 1024.0, 0) + " KiB"; });
  t += Row("Publish+Unpublish of one more, p50 / p99 (ms)", points, [&](const Point& p) { return lat(p.pair); });
  t += Row("nodevold CPU per capacity sample (ms)", points,
           [](const Point& p) { return Fixed(p.cpu_per_sample_ms, 3); });
  std::printf("%s\n", t.c_str());
  if (points.size() >= 2)
    std::printf("RssAnon per volume record: %.2f KiB (from %d volume records).\n\n",
                static_cast<double>(points[1].mem.anon_kb - points[0].mem.anon_kb) / o.volumes, o.volumes);
  std::printf("| operation | count | wall (s) | per second |\n|---|---:|---:|---:|\n");
  auto op = [&](const char* what, int n, double s) {
    std::printf("| %s | %d | %s | %s |\n", what, n, Fixed(s, 2).c_str(), Fixed(s > 0 ? n / s : 0, 0).c_str());
  };
  op("CreateVolume", o.volumes, create_s);
  op("Publish", o.publications, publish_s);
  op("Unpublish", o.publications, unpublish_s);
  op("DeleteVolume", o.volumes, delete_s);
  std::printf("\n| start | exec to first answer (s) | nodevold CPU by then (s) | VmRSS then |\n|---:|---:|---:|---:|\n");
  for (size_t k = 0; k < starts.size(); ++k)
    std::printf("| %zu | %s | %s | %s |\n", k + 1, Fixed(starts[k], 3).c_str(), Fixed(start_cpu[k], 3).c_str(),
                Mb(start_mem[k].rss_kb).c_str());
  std::printf("\nBaseline: reading the %zu record files by hand (readdir, open, read; warm): %s s.\n",
              by_hand_files, Fixed(by_hand_s, 3).c_str());
  std::printf("Mounts left below the sandbox after deleting everything: %d.\n", left_mounted);
  return left_mounted == 0 ? 0 : 1;
}
