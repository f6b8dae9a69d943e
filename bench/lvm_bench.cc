// lvm_bench: the life of an LVM volume through nodevold against the same
// lvm, mkfs and mount commands run by hand (issue 4).
//
// One round, for each volume type (thick, thin) of --size bytes (1 GiB):
//   nodevold   CreateVolume -> Publish into a pod volume directory ->
//              Unpublish -> DeleteVolume, over gRPC on its unix socket;
//   by hand    bench/lvm-by-hand.sh create / publish / unpublish / delete:
//              lvcreate, mkfs.ext4, mount, chmod / mount --bind / umount x2 /
//              dd (thick) and lvremove, with the options nodevold uses.
// The two alternate within a round (their order swaps every round), so
// that background load hits both alike; nodevold is stopped (SIGSTOP)
// while the hand script runs, so that its capacity poll does not slow the
// baseline down, and after SIGCONT its overdue poll is let finish before
// the next call, as on a daemon left idle. The hand script times its own
// commands with bash's $EPOCHREALTIME (no extra process); the bench also
// times the whole script, bash start included.
//
// Then a counting pass: a second nodevold (fresh state, same volume group)
// under `strace -f --seccomp-bpf -e trace=execve,clone...`, and the hand
// script under strace too, run the same operations; every process started
// is attributed to the operation (the gRPC call's time window and the
// thread that spawned it) or to nodevold's capacity monitor.
//
// With --snapshots: instead, snapshot and restore of a thin volume holding
// data through nodevold against lvcreate -s, mount and lvremove by hand
// (issue 17; see "snapshots" below).
//
// Must run as root, on a machine (a VM guest: tests/vm/lvm_bench_run.sh)
// where --devices may be wiped: nodevold builds volume group --vg on it.
//   lvm_bench --devices=/dev/vdb [--rounds=5] [--size=1073741824] ...
// Markdown on stdout, progress on stderr. See --help.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include "bench_util.h"
#include "spawn_daemon.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "mount/mount_table.h"
#include "nodevol/v1/node.grpc.pb.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;
namespace v1 = nodevol::v1;

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

// ------------------------------------------------------------------ options

struct Options {
  std::string nodevold = NODEVOLD_PATH;
  std::string script = LVM_BY_HAND_PATH;
  std::string strace = "/usr/bin/strace";
  std::string lvm = "/usr/sbin/lvm";
  std::string devices;  // required
  std::string vg = "nv";
  std::string thinpool = "tp";
  std::string thinpool_size = "60%";
  std::string overprovision = "2";
  std::vector<std::string> types = {"thick", "thin"};
  uint64_t size = uint64_t{1} << 30;
  int rounds = 20;
  int warmup = 1;
  int count_rounds = 3;
  int capacity_poll_ms = 0;  // 0: nodevold's default
  std::string log_level = "info";
  std::string work_dir = "/tmp";
  bool pause_daemon = true;
  bool keep_sandbox = false;
  bool snapshots = false;  // --snapshots: the snapshot rounds instead
  int data_mib = 256;      // what the snapshotted volume holds
};

const char* kUsage =
    "Usage: lvm_bench --devices=DEV [options]   (as root; DEV is wiped)\n"
    "\n"
    "Create+Publish+Unpublish+Delete of LVM volumes through a private nodevold\n"
    "against the same lvm/mkfs/mount commands run by hand (bench/lvm-by-hand.sh).\n"
    "\n"
    "  --devices=DEV[,DEV]   disks for the volume group (nodevold creates it)\n"
    "  --vg=NAME             volume group (default nv); two pools share it:\n"
    "                        thick, and thin in thin pool --thinpool\n"
    "  --thinpool=NAME       (default tp), --thinpool-size=SIZE|N% (default 60%),\n"
    "  --overprovision=R     (default 2)\n"
    "  --types=thick,thin    which pools to measure\n"
    "  --size=BYTES          volume size (default 1073741824, 1 GiB)\n"
    "  --rounds=N            timed rounds per type (default 20)\n"
    "  --warmup=N            untimed rounds per type first (default 1)\n"
    "  --count-rounds=N      rounds of the strace counting pass (default 3; 0: none)\n"
    "  --capacity-poll-ms=MS nodevold's --capacity-poll-ms (default: its own, 2000)\n"
    "  --log-level=LEVEL     nodevold's log level (default info, its default)\n"
    "  --no-pause            leave nodevold running (not SIGSTOPped) during the\n"
    "                        hand script; by default it is stopped, and let\n"
    "                        settle (its overdue capacity poll) after SIGCONT\n"
    "  --work-dir=DIR        sandbox location: nodevold's state and staging dirs,\n"
    "                        the pods root (default /tmp; production keeps state\n"
    "                        on a disk, so give a disk's filesystem)\n"
    "  --nodevold=PATH       (default " NODEVOLD_PATH ")\n"
    "  --script=PATH         (default " LVM_BY_HAND_PATH ")\n"
    "  --strace=PATH         (default /usr/bin/strace)\n"
    "  --keep-sandbox        do not remove the sandbox\n"
    "  --snapshots           instead: snapshot, restore (same size), publish,\n"
    "                        unpublish, delete restore, delete snapshot of a thin\n"
    "                        volume of --size holding --data-mib (default 256) of\n"
    "                        data, against lvcreate -s, mount, lvremove by hand\n";

bool ParseOptions(int argc, char** argv, Options* o) {
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
    auto num = [&](int* out, int min) -> bool {
      if (!need()) return false;
      char* end = nullptr;
      long v = std::strtol(val.c_str(), &end, 10);
      if (val.empty() || *end || v < min || v > 100000000) return false;
      *out = static_cast<int>(v);
      return true;
    };
    if (key == "--help" || key == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (key == "--devices" && need()) {
      o->devices = val;
    } else if (key == "--vg" && need()) {
      o->vg = val;
    } else if (key == "--thinpool" && need()) {
      o->thinpool = val;
    } else if (key == "--thinpool-size" && need()) {
      o->thinpool_size = val;
    } else if (key == "--overprovision" && need()) {
      o->overprovision = val;
    } else if (key == "--types" && need()) {
      o->types.clear();
      std::stringstream ss(val);
      std::string t;
      while (std::getline(ss, t, ','))
        if (t == "thick" || t == "thin") o->types.push_back(t);
        else return false;
      if (o->types.empty()) return false;
    } else if (key == "--size" && need()) {
      char* end = nullptr;
      o->size = std::strtoull(val.c_str(), &end, 10);
      if (val.empty() || *end || o->size < (uint64_t{16} << 20)) return false;
    } else if (key == "--rounds") {
      if (!num(&o->rounds, 1)) return false;
    } else if (key == "--warmup") {
      if (!num(&o->warmup, 0)) return false;
    } else if (key == "--count-rounds") {
      if (!num(&o->count_rounds, 0)) return false;
    } else if (key == "--capacity-poll-ms") {
      if (!num(&o->capacity_poll_ms, 100)) return false;
    } else if (key == "--log-level" && need()) {
      o->log_level = val;
    } else if (key == "--no-pause") {
      o->pause_daemon = false;
    } else if (key == "--work-dir" && need()) {
      o->work_dir = val;
    } else if (key == "--nodevold" && need()) {
      o->nodevold = val;
    } else if (key == "--script" && need()) {
      o->script = val;
    } else if (key == "--strace" && need()) {
      o->strace = val;
    } else if (key == "--keep-sandbox") {
      o->keep_sandbox = true;
    } else if (key == "--snapshots") {
      o->snapshots = true;
    } else if (key == "--data-mib") {
      if (!num(&o->data_mib, 1)) return false;
    } else {
      std::fprintf(stderr, "lvm_bench: unknown or incomplete option \"%s\"\n", a.c_str());
      return false;
    }
  }
  if (o->devices.empty()) {
    std::fprintf(stderr, "lvm_bench: --devices is required (the disk nodevold builds the volume group on)\n");
    return false;
  }
  return true;
}

// ------------------------------------------------------------------ helpers

using bench::CpuModel;
using bench::CpuSeconds;
using bench::Fixed;
using bench::FsType;
using bench::MemTotal;
using bench::ReadFile;
using bench::Trim;

std::string FirstLine(const std::string& s) { return Trim(s.substr(0, s.find('\n'))); }

// Milliseconds with sensible precision.
std::string Ms(double ms) { return Fixed(ms, ms < 100 ? 1 : 0); }

double Median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
double Min(const std::vector<double>& v) { return v.empty() ? NAN : *std::min_element(v.begin(), v.end()); }
double Max(const std::vector<double>& v) { return v.empty() ? NAN : *std::max_element(v.begin(), v.end()); }

double RealNow() {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

double MsSince(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

bool CpuHasFlag(const std::string& flag) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) return (" " + line + " ").find(" " + flag + " ") != std::string::npos;
  return false;
}

double ChildrenCpuSeconds() {
  struct rusage ru;
  getrusage(RUSAGE_CHILDREN, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

bool IsMountRoot(const std::string& path) {
  struct statx stx;
  return ::statx(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW, 0, &stx) == 0 &&
         (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
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

// Runs argv (argv[0] a path), stdout captured, stderr appended to err_log.
struct ProcResult {
  int code = -1;
  std::string out;
  double wall_ms = 0;
};

bool RunCapture(const std::vector<std::string>& argv, const std::string& err_log, ProcResult* r,
                const std::vector<std::string>& extra_env = {}) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return false;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, err_log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e) env_s.push_back(*e);
  env_s.insert(env_s.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> env;
  for (std::string& e : env_s) env.push_back(e.data());
  env.push_back(nullptr);
  pid_t pid = -1;
  auto t0 = Clock::now();
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(p[1]);
  if (rc != 0) {
    ::close(p[0]);
    r->code = -1;
    r->out = std::string("cannot start ") + argv[0] + ": " + std::strerror(rc);
    return false;
  }
  r->out.clear();
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(p[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    r->out.append(buf, static_cast<size_t>(n));
  }
  ::close(p[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r->wall_ms = MsSince(t0);
  r->code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r->code == 0;
}

std::unique_ptr<v1::Node::Stub> NewStub(const std::string& socket) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
  return v1::Node::NewStub(grpc::CreateCustomChannel("unix:" + socket, grpc::InsecureChannelCredentials(), args));
}

void SetDeadline(grpc::ClientContext* ctx, int seconds) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
}

// ------------------------------------------------------------------ nodevold

struct Daemon {
  std::string dir, state, pods, socket, log, conf, trace;  // trace: strace output, or empty
  pid_t pid = -1;         // nodevold
  pid_t strace_pid = -1;  // its tracer, when traced
  double ready_rt = 0;    // realtime of its first answer
  std::unique_ptr<v1::Node::Stub> stub;
  bool paused = false;
};

std::vector<std::string> DaemonArgs(const Options& o, const Daemon& d) {
  std::vector<std::string> a = {o.nodevold,
                                "--config=" + d.conf,
                                "--node-name=lvm-bench",
                                "--socket=" + d.socket,
                                "--state-dir=" + d.state,
                                "--pods-root=" + d.pods,
                                "--metrics-address=off",
                                "--log-target=stderr",
                                "--log-level=" + o.log_level};
  std::string devices = o.devices;  // space-separated in a pool option (disks.h)
  std::replace(devices.begin(), devices.end(), ',', ' ');
  a.push_back("--pool=name=thick,backend=lvm,vg=" + o.vg + ",type=thick,devices=" + devices);
  a.push_back("--pool=name=thin,backend=lvm,vg=" + o.vg + ",type=thin,thinpool=" + o.thinpool +
              ",thinpool-size=" + o.thinpool_size + ",overprovision=" + o.overprovision + ",devices=" + devices);
  if (o.capacity_poll_ms) a.push_back("--capacity-poll-ms=" + std::to_string(o.capacity_poll_ms));
  return a;
}

// The child of pid (strace) running `binary`, or -1. Not simply its first
// child: strace --seccomp-bpf first forks short-lived children of its own
// to probe the kernel.
pid_t ChildRunning(pid_t pid, const std::string& binary) {
  std::stringstream ss(ReadFile("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children"));
  for (long c; ss >> c;) {
    std::string cmd = ReadFile("/proc/" + std::to_string(c) + "/cmdline");
    if (cmd.substr(0, cmd.find('\0')) == binary) return static_cast<pid_t>(c);
  }
  return -1;
}

bool StartDaemon(const Options& o, Daemon* d, std::string* err) {
  fs::create_directories(d->pods);
  std::ofstream(d->conf, std::ios::app).close();
  std::vector<std::string> argv = DaemonArgs(o, *d);
  if (!d->trace.empty()) {
    // Only execve and the clones (to know which thread started what) stop
    // the tracee: --seccomp-bpf keeps every other syscall at full speed.
    std::vector<std::string> s = {o.strace, "-f", "--seccomp-bpf", "-q", "-ttt", "-s", "96", "-e", "signal=none",
                                  "-e", "trace=execve,clone,clone3,fork,vfork", "-o", d->trace, "--"};
    argv.insert(argv.begin(), s.begin(), s.end());
  }
  pid_t pid = -1;
  int rc = SpawnDaemon(argv, d->log, &pid);
  if (rc != 0) {
    *err = "cannot start " + argv[0] + ": " + std::strerror(rc);
    return false;
  }
  if (d->trace.empty()) d->pid = pid;
  else d->strace_pid = pid;
  d->stub = NewStub(d->socket);
  auto until = Clock::now() + std::chrono::seconds(120);  // lvm under TCG: vgcreate, thin pool
  while (Clock::now() < until && !g_stop) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      d->pid = d->strace_pid = -1;
      *err = "nodevold exited during start:\n" + ReadFile(d->log);
      return false;
    }
    if (d->pid <= 0) d->pid = ChildRunning(d->strace_pid, o.nodevold);
    if (d->pid > 0 && access(d->socket.c_str(), F_OK) == 0) {
      grpc::ClientContext ctx;
      SetDeadline(&ctx, 2);
      v1::GetInfoResponse resp;
      if (d->stub->GetInfo(&ctx, v1::GetInfoRequest(), &resp).ok()) {
        d->ready_rt = RealNow();
        return true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  *err = "nodevold did not answer within 120 s:\n" + ReadFile(d->log);
  return false;
}

// Whether any thread of pid has a child process running.
bool HasChildren(pid_t pid) {
  std::error_code ec;
  for (const auto& t : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec))
    if (!Trim(ReadFile(t.path().string() + "/children")).empty()) return true;
  return false;
}

// SIGSTOP, after letting a running lvm command of the daemon finish.
void Pause(Daemon* d) {
  if (d->paused || d->pid <= 0) return;
  kill(d->pid, SIGSTOP);
  d->paused = true;
  auto until = Clock::now() + std::chrono::seconds(30);
  while (HasChildren(d->pid) && Clock::now() < until) {
    kill(d->pid, SIGCONT);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    kill(d->pid, SIGSTOP);
  }
}

void Resume(Daemon* d) {
  if (!d->paused) return;
  kill(d->pid, SIGCONT);
  d->paused = false;
}

// After a pause the capacity monitor's poll is overdue and fires at once
// (an lvm fullreport when its cached report is stale): let it finish, as
// it would have on a daemon left idle, before timing calls. The hand
// script changed the VG meanwhile, which nodevold sees in the metadata on
// the PVs and reads a new report for, at its next poll: an untimed
// GetCapacity is that poll, so that a daemon left idle after an operator's
// lvm commands is what the timed calls meet.
void Settle(Daemon* d) {
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  grpc::ClientContext ctx;
  v1::GetCapacityResponse resp;
  d->stub->GetCapacity(&ctx, v1::GetCapacityRequest(), &resp);
  auto until = Clock::now() + std::chrono::seconds(20);
  int quiet = 0;
  while (quiet < 3 && Clock::now() < until) {
    quiet = HasChildren(d->pid) ? 0 : quiet + 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// What pid, its threads and every process below it are doing (for a
// daemon that does not stop).
std::string ProcessReport(pid_t pid) {
  std::map<pid_t, pid_t> ppid;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    std::string n = e.path().filename().string();
    if (n.empty() || !std::isdigit(static_cast<unsigned char>(n[0]))) continue;
    std::string st = ReadFile(e.path().string() + "/stat");
    size_t rp = st.rfind(')');
    if (rp == std::string::npos) continue;
    std::stringstream ss(st.substr(rp + 2));
    std::string state;
    long pp = 0;
    ss >> state >> pp;
    ppid[static_cast<pid_t>(std::atol(n.c_str()))] = static_cast<pid_t>(pp);
  }
  auto line = [](const std::string& dir) {
    std::string st = ReadFile(dir + "/stat");
    size_t rp = st.rfind(')');
    std::string state = rp == std::string::npos ? "?" : st.substr(rp + 2, 1);
    std::string cmd = ReadFile(dir + "/cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.size() > 120) cmd = cmd.substr(0, 120) + "...";
    std::string sig;  // pending, blocked and tracer: why a signal does not act
    std::stringstream st_in(ReadFile(dir + "/status"));
    for (std::string l; std::getline(st_in, l);)
      if (l.rfind("SigPnd", 0) == 0 || l.rfind("ShdPnd", 0) == 0 || l.rfind("SigBlk", 0) == 0 ||
          l.rfind("TracerPid", 0) == 0)
        sig += " " + l.substr(0, l.find(':')) + "=" + Trim(l.substr(l.find(':') + 1));
    std::string stat = ReadFile(dir + "/stat");
    if (size_t rp = stat.rfind(')'); rp != std::string::npos) {
      std::stringstream f(stat.substr(rp + 2));
      std::string x;
      double ticks = 0;
      for (int i = 3; f >> x && i <= 15; ++i)
        if (i == 14 || i == 15) ticks += std::atof(x.c_str());
      sig += " cpu=" + Fixed(ticks / static_cast<double>(sysconf(_SC_CLK_TCK)), 2) + "s";
    }
    std::string stack = ReadFile(dir + "/stack");
    std::replace(stack.begin(), stack.end(), '\n', ' ');
    return state + " wchan=" + ReadFile(dir + "/wchan") + sig + " syscall=" + FirstLine(ReadFile(dir + "/syscall")) +
           (stack.empty() ? "" : " stack: " + stack) + "\n      " + cmd;
  };
  std::string out;
  std::vector<pid_t> todo = {pid};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    std::string dir = "/proc/" + std::to_string(p);
    out += "  pid " + std::to_string(p) + ": " + line(dir) + "\n";
    for (const auto& t : fs::directory_iterator(dir + "/task", ec)) {
      std::string tid = t.path().filename().string();
      if (tid == std::to_string(p)) continue;
      std::string st = ReadFile(t.path().string() + "/stat");
      size_t rp = st.rfind(')');
      out += "    tid " + tid + ": " + (rp == std::string::npos ? "?" : st.substr(rp + 2, 1)) +
             " wchan=" + ReadFile(t.path().string() + "/wchan") + "\n";
    }
    for (const auto& [c, pp] : ppid)
      if (pp == p) todo.push_back(c);
  }
  return out;
}

int StopDaemon(Daemon* d) {
  if (d->pid <= 0) return -1;
  Resume(d);
  d->stub.reset();
  kill(d->pid, SIGTERM);
  pid_t waited = d->strace_pid > 0 ? d->strace_pid : d->pid;
  int status = 0;
  auto until = Clock::now() + std::chrono::seconds(60);
  int stage = 0;
  while (waitpid(waited, &status, WNOHANG) == 0) {
    if (Clock::now() > until) {
      ++stage;
      std::string tail = ReadFile(d->log);
      if (tail.size() > 2000) tail = tail.substr(tail.size() - 2000);
      std::fprintf(stderr, "lvm_bench: nodevold did not stop %s; its state:\n%s---- end of its log ----\n%s",
                   stage == 1 ? "on SIGTERM for 60 s" : "yet", ProcessReport(waited).c_str(), tail.c_str());
      if (stage == 1) {
        // strace then ends by itself, its output complete.
        kill(d->pid, SIGKILL);
      } else if (stage == 2 && d->strace_pid > 0) {
        // It ignores SIGTERM (-o FILE PROG); as --seccomp-bpf implies
        // --kill-on-exit, its end kills whatever it still traces.
        kill(d->strace_pid, SIGKILL);
      } else {
        waitpid(waited, &status, 0);
        break;
      }
      until = Clock::now() + std::chrono::seconds(15);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  d->pid = d->strace_pid = -1;
  if (stage) return 137;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// ------------------------------------------------------------------ operations

enum Op { kCreate = 0, kPublish, kUnpublish, kDelete, kOps };
const char* kOpName[kOps] = {"create", "publish", "unpublish", "delete"};

// A time window of one operation (realtime seconds), for the counting pass.
struct Window {
  std::string type;
  int op;
  double t0, t1;
};

struct DaemonRound {
  double ms[kOps] = {};
  double cpu_s = 0;  // nodevold + reaped children
};

std::string PodTarget(const std::string& pods, const std::string& uid, const std::string& name) {
  return pods + "/" + uid + "/volumes/nodevol.io~volume/" + name;
}

// One round of one type through nodevold. "" or an error.
std::string DaemonRoundOnce(const Options& o, Daemon* d, const std::string& type, const std::string& tag,
                            DaemonRound* r, std::vector<Window>* windows) {
  const std::string name = "bench-" + type + "-" + tag;
  const std::string target = PodTarget(d->pods, "pod-" + type + "-" + tag, name);
  std::error_code ec;
  fs::create_directories(target, ec);  // as kubelet does, before the call
  double cpu0 = CpuSeconds(d->pid, true);
  auto timed = [&](int op, auto&& call) -> grpc::Status {
    double rt0 = RealNow();
    auto t0 = Clock::now();
    grpc::Status st = call();
    r->ms[op] = MsSince(t0);
    if (windows) windows->push_back({type, op, rt0, RealNow()});
    return st;
  };
  grpc::Status st = timed(kCreate, [&] {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 600);
    v1::CreateVolumeRequest req;
    req.set_name(name);
    req.set_pool(type);
    req.set_size_bytes(o.size);
    v1::CreateVolumeResponse resp;
    return d->stub->CreateVolume(&ctx, req, &resp);
  });
  if (!st.ok()) return "CreateVolume " + name + ": " + st.error_message();
  st = timed(kPublish, [&] {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 600);
    v1::PublishRequest req;
    req.set_volume(name);
    req.set_target(target);
    v1::PublishResponse resp;
    return d->stub->Publish(&ctx, req, &resp);
  });
  if (!st.ok()) return "Publish " + name + ": " + st.error_message();
  if (!IsMountRoot(target)) return target + " is not a mount point after Publish";
  st = timed(kUnpublish, [&] {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 600);
    v1::UnpublishRequest req;
    req.set_target(target);
    v1::UnpublishResponse resp;
    return d->stub->Unpublish(&ctx, req, &resp);
  });
  if (!st.ok()) return "Unpublish " + target + ": " + st.error_message();
  if (IsMountRoot(target)) return target + " is still a mount point after Unpublish";
  st = timed(kDelete, [&] {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 600);
    v1::DeleteVolumeRequest req;
    req.set_name(name);
    v1::DeleteVolumeResponse resp;
    return d->stub->DeleteVolume(&ctx, req, &resp);
  });
  if (!st.ok()) return "DeleteVolume " + name + ": " + st.error_message();
  r->cpu_s = CpuSeconds(d->pid, true) - cpu0;
  fs::remove_all(d->pods + "/pod-" + type + "-" + tag, ec);
  return "";
}

struct HandRound {
  double ms[kOps] = {};       // the commands, timed by the script
  double wall_ms[kOps] = {};  // the script's whole run, bash start included
  std::map<std::string, double> cmd_ms;
  double cpu_s = 0;  // bash and its commands
};

struct HandPaths {
  std::string root, staging_root, pods, log;
};

// Runs the script (optionally under strace into trace_file); parses its
// "T label us" and "TOTAL us" lines.
std::string RunScript(const Options& o, const HandPaths& h, const std::vector<std::string>& args, double* total_ms,
                      double* wall_ms, std::map<std::string, double>* cmd_ms, const std::string& trace_file = "") {
  std::vector<std::string> argv;
  if (!trace_file.empty())
    argv = {o.strace, "-f", "--seccomp-bpf", "-q", "-ttt", "-s", "96", "-e", "signal=none", "-e", "trace=execve",
            "-o", trace_file, "--"};
  argv.push_back(o.script);
  argv.insert(argv.end(), args.begin(), args.end());
  ProcResult r;
  if (!RunCapture(argv, h.log, &r, {"LVM=" + o.lvm})) {
    std::string tail = ReadFile(h.log);
    if (tail.size() > 3000) tail = tail.substr(tail.size() - 3000);
    return "lvm-by-hand.sh " + args[0] + " exited " + std::to_string(r.code) + ":\n" + tail;
  }
  if (wall_ms) *wall_ms = r.wall_ms;
  std::stringstream ss(r.out);
  std::string line;
  bool total = false;
  while (std::getline(ss, line)) {
    std::stringstream ls(line);
    std::string kind, label;
    double us = 0;
    if (line.rfind("T ", 0) == 0 && (ls >> kind >> label >> us)) {
      if (cmd_ms) (*cmd_ms)[label] += us / 1000;
    } else if (line.rfind("TOTAL ", 0) == 0 && (ls >> kind >> us)) {
      if (total_ms) *total_ms = us / 1000;
      total = true;
    }
  }
  if (!total) return "lvm-by-hand.sh " + args[0] + ": no TOTAL line in its output: " + r.out;
  return "";
}

// One round of one type by hand. With trace_prefix, each operation runs
// under strace into trace_prefix + "-" + op.
std::string HandRoundOnce(const Options& o, const HandPaths& h, const std::string& type, const std::string& tag,
                          HandRound* r, const std::string& trace_prefix = "") {
  const std::string lv = "hand-" + type + "-" + tag;
  const std::string staging = h.staging_root + "/" + lv;
  const std::string target = PodTarget(h.pods, "hand-pod-" + type + "-" + tag, lv);
  std::error_code ec;
  // The directories, as nodevold makes them (in-process, untimed here).
  if (::mkdir(staging.c_str(), 0700) != 0 && errno != EEXIST) return "mkdir " + staging + ": " + std::strerror(errno);
  fs::create_directories(target, ec);
  std::vector<std::string> args[kOps] = {
      {"create", type, o.vg, type == "thin" ? o.thinpool : "-", lv, lv, type, std::to_string(o.size), staging},
      {"publish", staging, target},
      {"unpublish", target, staging},
      {"delete", type, o.vg, lv}};
  double cpu0 = ChildrenCpuSeconds();
  for (int op = 0; op < kOps; ++op) {
    std::string trace = trace_prefix.empty() ? "" : trace_prefix + "-" + kOpName[op];
    std::string e = RunScript(o, h, args[op], &r->ms[op], &r->wall_ms[op], &r->cmd_ms, trace);
    if (!e.empty()) return e;
    if (op == kPublish && !IsMountRoot(target)) return target + " is not a mount point after the hand publish";
    if (op == kUnpublish && (IsMountRoot(target) || IsMountRoot(staging)))
      return "a mount is left after the hand unpublish";
  }
  r->cpu_s = ChildrenCpuSeconds() - cpu0;
  if (::rmdir(staging.c_str()) != 0) return "rmdir " + staging + ": " + std::strerror(errno);
  fs::remove_all(h.pods + "/hand-pod-" + type + "-" + tag, ec);
  return "";
}

// ------------------------------------------------------------------ strace parsing

struct Exec {
  pid_t pid = 0;     // the new program's process
  pid_t parent = 0;  // the thread that cloned it
  double ts = 0;
  double end = 0;    // when it exited (0: not seen)
  double Ms() const { return end > ts ? (end - ts) * 1000 : NAN; }
  std::string path, arg1;
  std::string What() const {
    std::string base = path.substr(path.rfind('/') + 1);
    return base == "lvm" && !arg1.empty() ? arg1 : base;
  }
  bool IsLvm() const { return path.size() >= 4 && path.compare(path.size() - 4, 4, "/lvm") == 0; }
};

// Successful execve calls of a `strace -f -ttt` log, with the thread that
// cloned each process (when clones were traced).
std::vector<Exec> ParseTrace(const std::string& file) {
  std::ifstream in(file);
  std::string line;
  std::map<pid_t, pid_t> parent;
  std::map<pid_t, Exec> pending;  // unfinished execve per pid
  std::map<pid_t, double> exited;
  std::vector<Exec> out;
  auto result_ok = [](const std::string& l) { return l.size() >= 3 && l.compare(l.size() - 3, 3, "= 0") == 0; };
  auto parse_exec = [](const std::string& rest, Exec* e) {
    // execve("/usr/sbin/lvm", ["/usr/sbin/lvm", "fullreport", ...
    size_t q1 = rest.find('"');
    size_t q2 = rest.find('"', q1 + 1);
    if (q1 == std::string::npos || q2 == std::string::npos) return;
    e->path = rest.substr(q1 + 1, q2 - q1 - 1);
    size_t b = rest.find('[', q2);
    if (b == std::string::npos) return;
    size_t a0 = rest.find('"', b);
    size_t a0e = a0 == std::string::npos ? a0 : rest.find('"', a0 + 1);
    if (a0e == std::string::npos || rest.compare(a0e + 1, 2, ", ") != 0) return;
    size_t a1 = rest.find('"', a0e + 1);
    size_t a1e = a1 == std::string::npos ? a1 : rest.find('"', a1 + 1);
    if (a1e != std::string::npos) e->arg1 = rest.substr(a1 + 1, a1e - a1 - 1);
  };
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    long pid = 0;
    double ts = 0;
    if (!(ss >> pid >> ts)) continue;
    std::string rest;
    std::getline(ss, rest);
    rest = Trim(rest);
    if (rest.rfind("+++ exited", 0) == 0 || rest.rfind("+++ killed", 0) == 0) {
      exited[static_cast<pid_t>(pid)] = ts;
      continue;
    }
    bool resumed = rest.rfind("<... ", 0) == 0;
    std::string name = resumed ? rest.substr(5, rest.find(' ', 5) - 5) : rest.substr(0, rest.find('('));
    if (name == "clone" || name == "clone3" || name == "fork" || name == "vfork") {
      size_t eq = rest.rfind("= ");
      if (eq != std::string::npos && rest.find("<unfinished") == std::string::npos) {
        long child = std::atol(rest.c_str() + eq + 2);
        if (child > 0) parent[static_cast<pid_t>(child)] = static_cast<pid_t>(pid);
      }
    } else if (name == "execve") {
      if (resumed) {
        auto it = pending.find(static_cast<pid_t>(pid));
        if (it != pending.end()) {
          if (result_ok(rest)) out.push_back(it->second);
          pending.erase(it);
        }
      } else {
        Exec e;
        e.pid = static_cast<pid_t>(pid);
        e.ts = ts;
        parse_exec(rest, &e);
        if (rest.find("<unfinished") != std::string::npos) pending[e.pid] = e;
        else if (result_ok(rest)) out.push_back(e);
      }
    }
  }
  for (Exec& e : out) {
    auto it = parent.find(e.pid);
    e.parent = it == parent.end() ? 0 : it->second;
    auto x = exited.find(e.pid);
    if (x != exited.end()) e.end = x->second;
  }
  std::sort(out.begin(), out.end(), [](const Exec& a, const Exec& b) { return a.ts < b.ts; });
  return out;
}

// Per type and operation: what the processes started were.
struct OpCount {
  int samples = 0;
  std::vector<int> lvm, other, bg_lvm;         // per sample
  std::map<std::string, int> lvm_what, other_what, bg_what;  // totals over samples
};

// "fullreport x2, lvcreate": how often each program ran per operation.
std::string Describe(const std::map<std::string, int>& what, int samples) {
  if (what.empty() || samples == 0) return "none";
  std::string s;
  for (const auto& [w, n] : what) {
    if (!s.empty()) s += ", ";
    s += w;
    if (n != samples) s += " x" + Fixed(static_cast<double>(n) / samples, n % samples ? 1 : 0);
  }
  return s;
}

std::string Range(const std::vector<int>& v) {
  if (v.empty()) return "-";
  int lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
  double mean = 0;
  for (int x : v) mean += x;
  mean /= v.size();
  if (lo == hi) return std::to_string(lo);
  return Fixed(mean, 1) + " (" + std::to_string(lo) + "-" + std::to_string(hi) + ")";
}

struct CountResult {
  bool ran = false;
  std::map<std::string, std::array<OpCount, kOps>> daemon, hand;
  int background_lvm = 0;       // lvm processes of the capacity monitor, over the ops
  double ops_seconds = 0;       // first op start to last op end
  int idle_lvm = 0;             // during the idle wait before the ops
  double idle_seconds = 0;
  std::map<std::string, int> startup;  // lvm processes before nodevold's first answer
  double startup_seconds = 0;
  std::vector<std::string> sequence;  // per op, what ran (first round)
  // Run time (exec to exit, under strace) of each program, ms.
  std::map<std::string, std::vector<double>> daemon_ms, monitor_ms, hand_ms;
  std::string stop_note;
};

// ------------------------------------------------------------------ report

struct TypeData {
  std::vector<DaemonRound> daemon;
  std::vector<HandRound> hand;
};

struct Report {
  std::map<std::string, TypeData> data;
  std::vector<double> report_ms, floor_ms, noop_wall_ms;
  CountResult count;
  std::string kernel, lvm_version, e2fs_version, nodevold_version, work_fs, start, host_note, commit;
  double total_s = 0;
};

std::vector<double> DaemonOp(const TypeData& t, int op) {
  std::vector<double> v;
  for (const auto& r : t.daemon) v.push_back(r.ms[op]);
  return v;
}
std::vector<double> DaemonTotal(const TypeData& t) {
  std::vector<double> v;
  for (const auto& r : t.daemon) v.push_back(r.ms[0] + r.ms[1] + r.ms[2] + r.ms[3]);
  return v;
}
std::vector<double> HandOp(const TypeData& t, int op, bool wall) {
  std::vector<double> v;
  for (const auto& r : t.hand) v.push_back(wall ? r.wall_ms[op] : r.ms[op]);
  return v;
}
std::vector<double> HandTotal(const TypeData& t, bool wall) {
  std::vector<double> v;
  for (const auto& r : t.hand)
    v.push_back(wall ? r.wall_ms[0] + r.wall_ms[1] + r.wall_ms[2] + r.wall_ms[3] : r.ms[0] + r.ms[1] + r.ms[2] + r.ms[3]);
  return v;
}

void PrintReport(const Options& o, const Report& rep) {
  std::ostringstream out;
  out << "## Setup\n\n| | |\n|---|---|\n";
  out << "| CPU (guest) | " << CpuModel() << (CpuHasFlag("hypervisor") ? ", virtualised" : "") << ", "
      << sysconf(_SC_NPROCESSORS_ONLN) << " CPU |\n";
  if (!rep.host_note.empty()) out << "| host | " << rep.host_note << " |\n";
  out << "| memory | " << MemTotal() << " |\n";
  out << "| kernel | " << rep.kernel << " |\n";
  out << "| lvm | " << rep.lvm_version << " |\n";
  out << "| mkfs.ext4 | " << rep.e2fs_version << " |\n";
  if (!rep.commit.empty()) out << "| source | " << rep.commit << " |\n";
  out << "| nodevold | " << rep.nodevold_version << ", --log-level=" << o.log_level << ", --capacity-poll-ms="
      << (o.capacity_poll_ms ? std::to_string(o.capacity_poll_ms) : "2000 (default)") << " |\n";
  out << "| pools | thick and thin (thin pool " << o.vg << "/" << o.thinpool << ", " << o.thinpool_size
      << " of the VG, overprovision " << o.overprovision << ") in VG " << o.vg << " on " << o.devices << " |\n";
  out << "| state, staging and pods dirs | " << o.work_dir << " (" << rep.work_fs << ") |\n";
  out << "| volume | " << o.size << " bytes, ext4 |\n";
  out << "| rounds | " << o.rounds << " timed per type (after " << o.warmup << " untimed), daemon and hand "
      << "alternating, order swapped every round; nodevold " << (o.pause_daemon ? "SIGSTOPped" : "running")
      << " while the hand script runs" << (o.pause_daemon ? ", and let settle after SIGCONT" : "") << " |\n";
  out << "| started | " << rep.start << ", run time " << Fixed(rep.total_s, 0) << " s |\n";

  out << "\n## Per operation (median of " << o.rounds << " rounds, ms)\n\n";
  out << "nodevold: the gRPC call, client side. By hand: the script's commands, each timed with "
         "`$EPOCHREALTIME`; \"incl. bash\": the whole script run, bash start included.\n\n";
  out << "| type | operation | nodevold | min-max | by hand | min-max | by hand incl. bash | nodevold / by hand | "
         "added |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const std::string& type : o.types) {
    auto it = rep.data.find(type);
    if (it == rep.data.end()) continue;
    const TypeData& t = it->second;
    for (int op = 0; op <= kOps; ++op) {
      std::vector<double> d = op < kOps ? DaemonOp(t, op) : DaemonTotal(t);
      std::vector<double> h = op < kOps ? HandOp(t, op, false) : HandTotal(t, false);
      std::vector<double> hw = op < kOps ? HandOp(t, op, true) : HandTotal(t, true);
      double dm = Median(d), hm = Median(h);
      std::string name = op < kOps ? kOpName[op] : "**round**";
      out << "| " << type << " | " << name << " | " << Ms(dm) << " | " << Ms(Min(d)) << "-" << Ms(Max(d)) << " | "
          << Ms(hm) << " | " << Ms(Min(h)) << "-" << Ms(Max(h)) << " | " << Ms(Median(hw)) << " | "
          << Fixed(dm / hm, 2) << "x | " << (dm >= hm ? "+" : "") << Ms(dm - hm) << " |\n";
    }
  }

  out << "\n## Round totals: the target\n\n";
  out << "Per round, create+publish+unpublish+delete; the median of the per-round ratios is given too "
         "(rounds are paired: the two halves of a round ran back to back).\n\n";
  out << "| type | nodevold (median) | by hand (median) | ratio of medians | overhead | median of per-round ratios | "
         "under 5 %? | CPU s/round nodevold (with its children) | CPU s/round by hand (bash and commands) |\n"
         "|---|---:|---:|---:|---:|---:|---|---:|---:|\n";
  for (const std::string& type : o.types) {
    auto it = rep.data.find(type);
    if (it == rep.data.end()) continue;
    const TypeData& t = it->second;
    std::vector<double> d = DaemonTotal(t), h = HandTotal(t, false), ratios, dc, hc;
    for (size_t i = 0; i < d.size() && i < h.size(); ++i) ratios.push_back(d[i] / h[i]);
    for (const auto& r : t.daemon) dc.push_back(r.cpu_s);
    for (const auto& r : t.hand) hc.push_back(r.cpu_s);
    double ratio = Median(d) / Median(h);
    out << "| " << type << " | " << Ms(Median(d)) << " ms | " << Ms(Median(h)) << " ms | " << Fixed(ratio, 3) << " | "
        << (ratio >= 1 ? "+" : "") << Fixed((ratio - 1) * 100, 1) << " % | " << Fixed(Median(ratios), 3) << " | "
        << ((ratio - 1) * 100 < 5 ? "**met**" : "**missed**") << " | " << Fixed(Median(dc), 2) << " | "
        << Fixed(Median(hc), 2) << " |\n";
  }

  out << "\n## By hand, per command (median ms)\n\n| type |";
  std::vector<std::string> labels = {"lvcreate", "mkfs.ext4", "mount", "chmod", "mount-bind", "umount-target",
                                     "umount-staging", "dd", "lvremove"};
  for (const std::string& l : labels) out << " " << l << " |";
  out << "\n|---|";
  for (size_t i = 0; i < labels.size(); ++i) out << "---:|";
  out << "\n";
  for (const std::string& type : o.types) {
    auto it = rep.data.find(type);
    if (it == rep.data.end()) continue;
    out << "| " << type << " |";
    for (const std::string& l : labels) {
      std::vector<double> v;
      for (const auto& r : it->second.hand)
        if (auto c = r.cmd_ms.find(l); c != r.cmd_ms.end()) v.push_back(c->second);
      out << " " << (v.empty() ? "-" : Ms(Median(v))) << " |";
    }
    out << "\n";
  }
  out << "\nFloors, median of " << rep.report_ms.size() << ": nodevold's `lvm fullreport` (its exact arguments) "
      << Ms(Median(rep.report_ms)) << " ms; `lvm version` " << Ms(Median(rep.floor_ms))
      << " ms; starting the hand script and doing nothing (bash, fork+exec from the bench) "
      << Ms(Median(rep.noop_wall_ms)) << " ms.\n";

  const CountResult& c = rep.count;
  if (c.ran) {
    out << "\n## Processes per operation (strace counting pass, " << o.count_rounds << " round"
        << (o.count_rounds > 1 ? "s" : "") << ")\n\n";
    out << "nodevold: processes its handler started during the call; \"monitor\": lvm processes the capacity "
           "monitor thread started during the call (its poll, or a poke by an earlier call). By hand: every "
           "process the script started.\n\n";
    out << "| type | operation | nodevold: lvm | which | nodevold: other | monitor: lvm during the call | "
           "by hand: lvm | by hand: all processes | which |\n|---|---|---:|---|---|---:|---:|---:|---|\n";
    for (const std::string& type : o.types) {
      auto di = c.daemon.find(type);
      auto hi = c.hand.find(type);
      if (di == c.daemon.end() || hi == c.hand.end()) continue;
      for (int op = 0; op < kOps; ++op) {
        const OpCount& d = di->second[op];
        const OpCount& h = hi->second[op];
        std::vector<int> hall;
        for (size_t i = 0; i < h.lvm.size(); ++i) hall.push_back(h.lvm[i] + h.other[i]);
        std::map<std::string, int> hwhat = h.lvm_what;
        for (const auto& [w, n] : h.other_what) hwhat[w] += n;
        out << "| " << type << " | " << kOpName[op] << " | " << Range(d.lvm) << " | " << Describe(d.lvm_what, d.samples)
            << " | " << (d.other_what.empty() ? "none" : Describe(d.other_what, d.samples)) << " | " << Range(d.bg_lvm)
            << " | " << Range(h.lvm) << " | " << Range(hall) << " | " << Describe(hwhat, h.samples) << " |\n";
      }
    }
    out << "\nnodevold's capacity monitor started " << c.background_lvm << " lvm processes (all `fullreport`) "
        << "while the counting pass's calls ran (" << Fixed(c.ops_seconds, 1) << " s, i.e. "
        << Fixed(c.ops_seconds > 0 ? c.background_lvm * 60 / c.ops_seconds : 0, 1) << " per minute), and "
        << c.idle_lvm << " in " << Fixed(c.idle_seconds, 1) << " s of idling before them.\n";
    int n = 0;
    for (const auto& [w, k] : c.startup) n += k;
    out << "\nA start of nodevold with both pools (volume group and thin pool already there) ran " << n
        << " lvm processes (" << Describe(c.startup, 1) << ") in " << Fixed(c.startup_seconds, 1)
        << " s before its first answer.\n";
    out << "\nRun time of each program in the counting pass (exec to exit, under strace; median ms, count):\n\n"
        << "| program | started by nodevold's handlers | by its capacity monitor | by the hand script |\n"
           "|---|---:|---:|---:|\n";
    std::set<std::string> progs;
    for (const auto* m : {&c.daemon_ms, &c.monitor_ms, &c.hand_ms})
      for (const auto& [k, _] : *m) progs.insert(k);
    auto cell = [](const std::map<std::string, std::vector<double>>& m, const std::string& k) -> std::string {
      auto it = m.find(k);
      if (it == m.end() || it->second.empty()) return "";
      return Ms(Median(it->second)) + " (" + std::to_string(it->second.size()) + ")";
    };
    for (const std::string& k : progs)
      out << "| " << k << " | " << cell(c.daemon_ms, k) << " | " << cell(c.monitor_ms, k) << " | "
          << cell(c.hand_ms, k) << " |\n";
    if (!c.stop_note.empty()) out << "\nNote: " << c.stop_note << ".\n";
    if (!c.sequence.empty()) {
      out << "\nFirst counting round, in order (`[m]` = by the capacity monitor):\n\n";
      for (const std::string& s : c.sequence) out << "- " << s << "\n";
    }
  }
  std::fputs(out.str().c_str(), stdout);
  std::fflush(stdout);
}

// ------------------------------------------------------------------ counting pass

std::string CountingPass(const Options& o, const std::string& root, const HandPaths& hand, CountResult* c) {
  Daemon d;
  d.dir = root + "/count";
  d.state = d.dir + "/state";
  d.pods = d.dir + "/pods";
  d.socket = d.dir + "/nodevold.sock";
  d.log = d.dir + "/nodevold.log";
  d.conf = d.dir + "/nodevold.conf";
  d.trace = d.dir + "/nodevold.strace";
  fs::create_directories(d.dir);
  std::string err;
  std::fprintf(stderr, "lvm_bench: counting pass: nodevold under strace\n");
  double spawn_rt = RealNow();
  if (!StartDaemon(o, &d, &err)) return err;
  c->startup_seconds = d.ready_rt - spawn_rt;
  // Idle first, so that the capacity monitor shows itself by a poll outside
  // any call (its thread is then known): it polls every 2 s but runs lvm
  // only when its cached report is older than 5 s (thin pools).
  int poll = o.capacity_poll_ms ? o.capacity_poll_ms : 2000;
  double idle_s = std::min(std::max(2.0 * poll / 1000 + 1, 12.0), 30.0);
  double idle_from = RealNow();
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int>(idle_s * 1000)));
  double idle_to = RealNow();
  std::vector<Window> windows;
  std::string failure;
  for (int r = 1; r <= o.count_rounds && failure.empty() && !g_stop; ++r)
    for (const std::string& type : o.types) {
      DaemonRound dr;
      failure = DaemonRoundOnce(o, &d, type, "c" + std::to_string(r), &dr, &windows);
      if (!failure.empty()) break;
    }
  int st = StopDaemon(&d);
  if (!failure.empty()) return failure + "\n" + ReadFile(d.log);
  if (st != 0)
    c->stop_note = "the traced nodevold did not stop on SIGTERM and was killed after the counted calls "
                   "(exit status " + std::to_string(st) + "; its state is on the bench's stderr)";

  std::vector<Exec> execs = ParseTrace(d.trace);
  // Threads that started processes while no call ran (after start-up): the
  // capacity monitor (and the main thread, which has finished its start-up).
  auto window_of = [&](double ts) -> int {
    for (size_t i = 0; i < windows.size(); ++i)
      if (ts >= windows[i].t0 && ts <= windows[i].t1) return static_cast<int>(i);
    return -1;
  };
  std::set<pid_t> background;
  for (const Exec& e : execs)
    if (e.ts > d.ready_rt && window_of(e.ts) < 0 && e.parent) background.insert(e.parent);
  std::vector<std::array<int, 3>> per_window(windows.size(), {0, 0, 0});  // lvm, other, bg lvm
  std::vector<std::string> seq(windows.size());
  std::vector<std::map<std::string, int>> lvm_what(windows.size()), other_what(windows.size()),
      bg_what(windows.size());
  for (const Exec& e : execs) {
    if (e.pid == d.pid) continue;  // nodevold's own start
    if (e.ts < d.ready_rt) {
      if (e.IsLvm()) ++c->startup[e.What()];
      continue;
    }
    if (e.ts >= idle_from && e.ts <= idle_to && e.IsLvm()) ++c->idle_lvm;
    int w = window_of(e.ts);
    bool bg = background.count(e.parent) > 0;
    if (!std::isnan(e.Ms())) (bg ? c->monitor_ms : c->daemon_ms)[e.What()].push_back(e.Ms());
    if (w < 0) {
      if (bg && e.IsLvm() && !windows.empty() && e.ts > windows.front().t0 && e.ts < windows.back().t1)
        ++c->background_lvm;
      continue;
    }
    if (bg) {
      if (e.IsLvm()) {
        ++per_window[w][2];
        ++bg_what[w][e.What()];
        ++c->background_lvm;
      }
      seq[w] += (seq[w].empty() ? "" : ", ") + std::string("[m] ") + e.What();
    } else {
      if (e.IsLvm()) {
        ++per_window[w][0];
        ++lvm_what[w][e.What()];
      } else {
        ++per_window[w][1];
        ++other_what[w][e.What()];
      }
      seq[w] += (seq[w].empty() ? "" : ", ") + e.What();
    }
  }
  c->idle_seconds = idle_to - idle_from;
  if (!windows.empty()) c->ops_seconds = windows.back().t1 - windows.front().t0;
  for (size_t i = 0; i < windows.size(); ++i) {
    OpCount& oc = c->daemon[windows[i].type][windows[i].op];
    ++oc.samples;
    oc.lvm.push_back(per_window[i][0]);
    oc.other.push_back(per_window[i][1]);
    oc.bg_lvm.push_back(per_window[i][2]);
    for (const auto& [k, n] : lvm_what[i]) oc.lvm_what[k] += n;
    for (const auto& [k, n] : other_what[i]) oc.other_what[k] += n;
    for (const auto& [k, n] : bg_what[i]) oc.bg_what[k] += n;
    if (i < o.types.size() * kOps)
      c->sequence.push_back(windows[i].type + " " + kOpName[windows[i].op] + ": " + (seq[i].empty() ? "(none)" : seq[i]));
  }

  // The hand script under strace, the same operations.
  std::fprintf(stderr, "lvm_bench: counting pass: the hand script under strace\n");
  std::string prefix = d.dir + "/hand";
  for (int r = 1; r <= o.count_rounds && !g_stop; ++r)
    for (const std::string& type : o.types) {
      HandRound hr;
      std::string p = prefix + "-" + type + "-" + std::to_string(r);
      std::string e = HandRoundOnce(o, hand, type, "c" + std::to_string(r), &hr, p);
      if (!e.empty()) return e;
      for (int op = 0; op < kOps; ++op) {
        std::vector<Exec> ex = ParseTrace(p + "-" + kOpName[op]);
        OpCount& oc = c->hand[type][op];
        ++oc.samples;
        int lvm = 0, other = 0;
        for (size_t i = 1; i < ex.size(); ++i) {  // [0]: the script itself
          if (!std::isnan(ex[i].Ms())) c->hand_ms[ex[i].What()].push_back(ex[i].Ms());
          if (ex[i].IsLvm()) {
            ++lvm;
            ++oc.lvm_what[ex[i].What()];
          } else {
            ++other;
            ++oc.other_what[ex[i].What()];
          }
        }
        oc.lvm.push_back(lvm);
        oc.other.push_back(other);
      }
    }
  c->ran = true;
  return "";
}

}  // namespace

namespace {

// ------------------------------------------------------------------ snapshots (--snapshots)
//
// A thin volume "bench-src" of --size holding --data-mib of data, published
// as a pod's (a snapshot is taken of a running pod's volume). Per round:
// snapshot it, restore the snapshot into a new volume of the same size,
// publish that into a pod, unpublish, delete the restore, delete the
// snapshot; by hand the same with lvcreate -s (-k y, then -k n of the
// snapshot), mount, mount --bind, umount, lvremove (bench/lvm-by-hand.sh).
// The first (warm-up) round of each side reads the restored data back and
// compares it with the source's: a benchmark of a restore that restores
// nothing would be worthless.

enum SnapOp { kSnap = 0, kRestore, kRPublish, kRUnpublish, kRDelete, kUnsnap, kSnapOps };
const char* kSnapOpName[kSnapOps] = {"snapshot", "restore", "publish", "unpublish", "delete restore",
                                     "delete snapshot"};

struct SnapRound {
  double ms[kSnapOps] = {};
  std::map<std::string, double> cmd_ms;  // by hand, per command
};

const char* kSnapSource = "bench-src";

// FNV-1a of a file; "" when it cannot be read.
std::string FileDigest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  uint64_t h = 1469598103934665603ULL;
  std::vector<char> buf(1 << 20);
  while (in.read(buf.data(), buf.size()) || in.gcount() > 0) {
    for (std::streamsize i = 0; i < in.gcount(); ++i) h = (h ^ static_cast<unsigned char>(buf[i])) * 1099511628211ULL;
    if (!in) break;
  }
  return std::to_string(h);
}

// Creates and publishes the source volume and fills it; *digest: its data's.
std::string SetUpSnapshotSource(const Options& o, Daemon* d, std::string* digest) {
  const std::string target = PodTarget(d->pods, "pod-src", kSnapSource);
  std::error_code ec;
  fs::create_directories(target, ec);
  grpc::ClientContext c1;
  SetDeadline(&c1, 600);
  v1::CreateVolumeRequest cr;
  cr.set_name(kSnapSource);
  cr.set_pool("thin");
  cr.set_size_bytes(o.size);
  v1::CreateVolumeResponse cresp;
  grpc::Status st = d->stub->CreateVolume(&c1, cr, &cresp);
  if (!st.ok()) return "CreateVolume " + std::string(kSnapSource) + ": " + st.error_message();
  grpc::ClientContext c2;
  SetDeadline(&c2, 600);
  v1::PublishRequest pr;
  pr.set_volume(kSnapSource);
  pr.set_target(target);
  v1::PublishResponse presp;
  st = d->stub->Publish(&c2, pr, &presp);
  if (!st.ok()) return "Publish " + std::string(kSnapSource) + ": " + st.error_message();
  // Incompressible, reproducible data, fsynced: what the snapshot must keep.
  std::ofstream out(target + "/data", std::ios::binary);
  uint64_t x = 0x9E3779B97F4A7C15ULL;
  std::vector<uint64_t> block((1 << 20) / sizeof(uint64_t));
  for (int m = 0; m < o.data_mib && out; ++m) {
    for (auto& w : block) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      w = x;
    }
    out.write(reinterpret_cast<const char*>(block.data()), 1 << 20);
  }
  out.close();
  if (!out) return "writing " + target + "/data failed";
  int fd = ::open((target + "/data").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0) return "fsync " + target + "/data: " + std::strerror(errno);
  ::close(fd);
  ::sync();
  *digest = FileDigest(target + "/data");
  return digest->empty() ? "cannot read back " + target + "/data" : "";
}

std::string DaemonSnapshotRound(const Options& o, Daemon* d, const std::string& tag, const std::string& digest,
                                SnapRound* r) {
  const std::string snap = "bs-" + tag, vol = "br-" + tag;
  const std::string target = PodTarget(d->pods, "pod-r-" + tag, vol);
  std::error_code ec;
  fs::create_directories(target, ec);
  auto timed = [&](int op, auto&& call) {
    auto t0 = Clock::now();
    grpc::ClientContext ctx;
    SetDeadline(&ctx, 600);
    grpc::Status st = call(&ctx);
    r->ms[op] = MsSince(t0);
    return st.ok() ? std::string() : std::string(kSnapOpName[op]) + " (" + tag + "): " + st.error_message();
  };
  std::string e = timed(kSnap, [&](grpc::ClientContext* c) {
    v1::CreateSnapshotRequest q;
    q.set_name(snap);
    q.set_source_volume(kSnapSource);
    v1::CreateSnapshotResponse a;
    return d->stub->CreateSnapshot(c, q, &a);
  });
  if (e.empty()) e = timed(kRestore, [&](grpc::ClientContext* c) {
    v1::CreateVolumeRequest q;
    q.set_name(vol);
    q.set_pool("thin");
    q.set_size_bytes(o.size);
    q.set_from_snapshot(snap);
    v1::CreateVolumeResponse a;
    return d->stub->CreateVolume(c, q, &a);
  });
  if (e.empty()) e = timed(kRPublish, [&](grpc::ClientContext* c) {
    v1::PublishRequest q;
    q.set_volume(vol);
    q.set_target(target);
    v1::PublishResponse a;
    return d->stub->Publish(c, q, &a);
  });
  if (e.empty() && !digest.empty() && FileDigest(target + "/data") != digest)
    e = "the volume restored by nodevold does not hold the snapshot's data";
  if (e.empty()) e = timed(kRUnpublish, [&](grpc::ClientContext* c) {
    v1::UnpublishRequest q;
    q.set_target(target);
    v1::UnpublishResponse a;
    return d->stub->Unpublish(c, q, &a);
  });
  if (e.empty()) e = timed(kRDelete, [&](grpc::ClientContext* c) {
    v1::DeleteVolumeRequest q;
    q.set_name(vol);
    v1::DeleteVolumeResponse a;
    return d->stub->DeleteVolume(c, q, &a);
  });
  if (e.empty()) e = timed(kUnsnap, [&](grpc::ClientContext* c) {
    v1::DeleteSnapshotRequest q;
    q.set_name(snap);
    v1::DeleteSnapshotResponse a;
    return d->stub->DeleteSnapshot(c, q, &a);
  });
  fs::remove_all(d->pods + "/pod-r-" + tag, ec);
  return e;
}

std::string HandSnapshotRound(const Options& o, const HandPaths& h, const std::string& tag, const std::string& digest,
                              SnapRound* r) {
  const std::string snap = "hs-" + tag, lv = "hr-" + tag;
  const std::string staging = h.staging_root + "/" + lv;
  const std::string target = PodTarget(h.pods, "hand-pod-r-" + tag, lv);
  std::error_code ec;
  if (::mkdir(staging.c_str(), 0700) != 0 && errno != EEXIST) return "mkdir " + staging + ": " + std::strerror(errno);
  fs::create_directories(target, ec);
  const std::string origin = "nv-" + std::string(kSnapSource);  // nodevold's LV of the source
  std::vector<std::string> args[kSnapOps] = {{"snapshot", o.vg, origin, snap, snap, "thin"},
                                              {"restore", o.vg, snap, lv, lv, "thin", staging},
                                              {"publish", staging, target},
                                              {"unpublish", target, staging},
                                              {"delete", "thin", o.vg, lv},
                                              {"delete", "thin", o.vg, snap}};
  for (int op = 0; op < kSnapOps; ++op) {
    std::map<std::string, double> cmd;
    std::string e = RunScript(o, h, args[op], &r->ms[op], nullptr, &cmd);
    if (!e.empty()) return e;
    for (const auto& [k, v] : cmd) r->cmd_ms[op == kUnsnap && k == "lvremove" ? "lvremove-snapshot" : k] += v;
    if (op == kRPublish && !digest.empty() && FileDigest(target + "/data") != digest)
      return "the volume restored by hand does not hold the snapshot's data";
  }
  if (::rmdir(staging.c_str()) != 0) return "rmdir " + staging + ": " + std::strerror(errno);
  fs::remove_all(h.pods + "/hand-pod-r-" + tag, ec);
  return "";
}

void PrintSnapshotReport(const Options& o, const Report& rep, const std::vector<SnapRound>& daemon,
                         const std::vector<SnapRound>& hand) {
  std::ostringstream out;
  out << "## Setup\n\n| | |\n|---|---|\n";
  out << "| CPU (guest) | " << CpuModel() << (CpuHasFlag("hypervisor") ? ", virtualised" : "") << ", "
      << sysconf(_SC_NPROCESSORS_ONLN) << " CPU |\n";
  if (!rep.host_note.empty()) out << "| host | " << rep.host_note << " |\n";
  out << "| memory | " << MemTotal() << " |\n| kernel | " << rep.kernel << " |\n| lvm | " << rep.lvm_version << " |\n";
  if (!rep.commit.empty()) out << "| source | " << rep.commit << " |\n";
  out << "| nodevold | " << rep.nodevold_version << ", --log-level=" << o.log_level << " |\n";
  out << "| pool | thin (" << o.vg << "/" << o.thinpool << ", " << o.thinpool_size << " of the VG on " << o.devices
      << ") |\n";
  out << "| source volume | " << o.size << " bytes, ext4, holding " << o.data_mib
      << " MiB of incompressible data, published as a pod's during every snapshot |\n";
  out << "| rounds | " << o.rounds << " timed (after " << o.warmup
      << " untimed that also compared the restored data with the source's), daemon and hand alternating, order "
         "swapped every round; nodevold "
      << (o.pause_daemon ? "SIGSTOPped while the hand script runs, and let settle after SIGCONT" : "running")
      << " |\n";
  out << "| started | " << rep.start << ", run time " << Fixed(rep.total_s, 0) << " s |\n";
  out << "\n## Per operation (median of " << daemon.size() << " rounds, ms)\n\n";
  out << "| operation | nodevold | min-max | by hand | min-max | nodevold / by hand | added |\n"
         "|---|---:|---:|---:|---:|---:|---:|\n";
  for (int op = 0; op <= kSnapOps; ++op) {
    std::vector<double> d, h;
    for (const auto& r : daemon) {
      double t = 0;
      for (int i = 0; i < kSnapOps; ++i) t += r.ms[i];
      d.push_back(op < kSnapOps ? r.ms[op] : t);
    }
    for (const auto& r : hand) {
      double t = 0;
      for (int i = 0; i < kSnapOps; ++i) t += r.ms[i];
      h.push_back(op < kSnapOps ? r.ms[op] : t);
    }
    double dm = Median(d), hm = Median(h);
    out << "| " << (op < kSnapOps ? kSnapOpName[op] : "**round**") << " | " << Ms(dm) << " | " << Ms(Min(d)) << "-"
        << Ms(Max(d)) << " | " << Ms(hm) << " | " << Ms(Min(h)) << "-" << Ms(Max(h)) << " | " << Fixed(dm / hm, 2)
        << "x | " << (dm >= hm ? "+" : "") << Ms(dm - hm) << " |\n";
  }
  out << "\nBy hand, per command (median ms):";
  std::set<std::string> labels;
  for (const auto& r : hand)
    for (const auto& [k, _] : r.cmd_ms) labels.insert(k);
  for (const std::string& l : labels) {
    std::vector<double> v;
    for (const auto& r : hand)
      if (auto c = r.cmd_ms.find(l); c != r.cmd_ms.end()) v.push_back(c->second);
    out << " " << l << " " << Ms(Median(v)) << ";";
  }
  out << "\n\nFloor: nodevold's `lvm fullreport` " << Ms(Median(rep.report_ms)) << " ms (median of "
      << rep.report_ms.size() << ").\n";
  std::fputs(out.str().c_str(), stdout);
  std::fflush(stdout);
}

// The --snapshots run, on a started daemon. "" or an error.
std::string SnapshotRuns(const Options& o, Daemon* d, const HandPaths& hand, Report* rep,
                         std::vector<SnapRound>* daemon_rounds, std::vector<SnapRound>* hand_rounds) {
  std::string digest;
  std::fprintf(stderr, "lvm_bench: source volume: %d MiB of data into %s\n", o.data_mib, kSnapSource);
  std::string e = SetUpSnapshotSource(o, d, &digest);
  if (!e.empty()) return e;
  for (int r = -o.warmup + 1; r <= o.rounds && !g_stop; ++r) {
    bool timed = r >= 1;
    std::string tag = timed ? std::to_string(r) : "w" + std::to_string(-r);
    SnapRound dr, hr;
    bool daemon_first = (r % 2) != 0;
    for (int half = 0; half < 2; ++half) {
      if ((half == 0) == daemon_first) {
        if (d->paused) {
          Resume(d);
          Settle(d);
        }
        e = DaemonSnapshotRound(o, d, tag, timed ? "" : digest, &dr);
        if (!e.empty()) return e + "\n---- nodevold log ----\n" + ReadFile(d->log);
      } else {
        if (o.pause_daemon) Pause(d);
        e = HandSnapshotRound(o, hand, tag, timed ? "" : digest, &hr);
        if (!e.empty()) return e;
      }
    }
    double dt = 0, ht = 0;
    for (int op = 0; op < kSnapOps; ++op) dt += dr.ms[op], ht += hr.ms[op];
    std::fprintf(stderr, "lvm_bench: %-8s snapshots: nodevold %7.0f ms (snapshot %s, restore %s)  by hand %7.0f ms "
                 "(%s, %s)  ratio %.3f\n", timed ? ("round " + std::to_string(r)).c_str() : "warmup", dt,
                 Ms(dr.ms[kSnap]).c_str(), Ms(dr.ms[kRestore]).c_str(), ht, Ms(hr.ms[kSnap]).c_str(),
                 Ms(hr.ms[kRestore]).c_str(), dt / ht);
    if (!timed) continue;
    daemon_rounds->push_back(dr);
    hand_rounds->push_back(hr);
    if (o.pause_daemon) Pause(d);
    double ms = 0;
    e = RunScript(o, hand, {"report"}, &ms, nullptr, nullptr);
    if (!e.empty()) return e;
    rep->report_ms.push_back(ms);
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseOptions(argc, argv, &o)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  if (geteuid() != 0) {
    std::fprintf(stderr, "lvm_bench: must run as root (lvm, mkfs, mounts)\n");
    return 2;
  }
  for (const std::string& p : {o.nodevold, o.script, o.lvm})
    if (access(p.c_str(), X_OK) != 0) {
      std::fprintf(stderr, "lvm_bench: %s is not executable\n", p.c_str());
      return 2;
    }
  if (o.count_rounds > 0 && access(o.strace.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "lvm_bench: %s is missing (install strace, or --count-rounds=0)\n", o.strace.c_str());
    return 2;
  }
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // The hand script and nodevold alike: no udevd, no waiting for it.
  if (access("/run/udev/control", F_OK) != 0) setenv("DM_DISABLE_UDEV", "1", 1);

  Report rep;
  auto run_start = Clock::now();
  {
    time_t now = time(nullptr);
    char buf[64];
    strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    rep.start = buf;
    struct utsname un;
    if (uname(&un) == 0) rep.kernel = std::string(un.sysname) + " " + un.release + " (" + un.machine + ")";
    if (const char* h = getenv("LVM_BENCH_HOST")) rep.host_note = h;
    if (const char* c = getenv("LVM_BENCH_COMMIT")) rep.commit = c;
    ProcResult r;
    RunCapture({o.lvm, "version"}, "/dev/null", &r);
    rep.lvm_version = FirstLine(r.out);
    if (size_t c = rep.lvm_version.find(':'); c != std::string::npos) rep.lvm_version = Trim(rep.lvm_version.substr(c + 1));
    // mkfs.ext4 -V prints on stderr.
    RunCapture({"/bin/sh", "-c", "mkfs.ext4 -V 2>&1"}, "/dev/null", &r);
    rep.e2fs_version = FirstLine(r.out);
  }

  std::string tmpl = o.work_dir + "/lvm-bench-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) {
    std::fprintf(stderr, "lvm_bench: mkdtemp %s: %s\n", tmpl.c_str(), std::strerror(errno));
    return 1;
  }
  const std::string root = buf.data();
  rep.work_fs = FsType(root);
  Daemon d;
  d.dir = root + "/timing";
  d.state = d.dir + "/state";
  d.pods = d.dir + "/pods";
  d.socket = d.dir + "/nodevold.sock";
  d.log = d.dir + "/nodevold.log";
  d.conf = d.dir + "/nodevold.conf";
  HandPaths hand{root + "/hand", root + "/hand/staging", root + "/hand/pods", root + "/hand/script.log"};
  fs::create_directories(d.dir);
  fs::create_directories(hand.staging_root);
  fs::create_directories(hand.pods);
  std::fprintf(stderr, "lvm_bench: sandbox %s (%s)\n", root.c_str(), rep.work_fs.c_str());

  int rc = 0;
  std::vector<SnapRound> snap_daemon, snap_hand;  // --snapshots
  auto fail = [&](const std::string& msg) {
    std::fprintf(stderr, "lvm_bench: %s\n", msg.c_str());
    rc = 1;
  };
  do {
    std::string err;
    std::fprintf(stderr, "lvm_bench: starting nodevold (it builds VG %s on %s)\n", o.vg.c_str(), o.devices.c_str());
    auto t0 = Clock::now();
    if (!StartDaemon(o, &d, &err)) {
      fail(err);
      break;
    }
    {
      grpc::ClientContext ctx;
      SetDeadline(&ctx, 30);
      v1::GetInfoResponse info;
      if (d.stub->GetInfo(&ctx, v1::GetInfoRequest(), &info).ok()) rep.nodevold_version = info.version();
    }
    std::fprintf(stderr, "lvm_bench: nodevold %s ready after %.1f s\n", rep.nodevold_version.c_str(), MsSince(t0) / 1000);
    if (o.snapshots) {
      std::string e = SnapshotRuns(o, &d, hand, &rep, &snap_daemon, &snap_hand);
      if (!e.empty()) fail(e);
      break;
    }

    // rounds: negative = warm-up (untimed)
    for (int r = -o.warmup + 1; r <= o.rounds && rc == 0 && !g_stop; ++r) {
      bool timed = r >= 1;
      std::string tag = timed ? std::to_string(r) : "w" + std::to_string(-r);
      for (const std::string& type : o.types) {
        DaemonRound dr;
        HandRound hr;
        bool daemon_first = (r % 2) != 0;
        for (int half = 0; half < 2 && rc == 0; ++half) {
          if ((half == 0) == daemon_first) {
            if (d.paused) {
              Resume(&d);
              Settle(&d);
            }
            std::string e = DaemonRoundOnce(o, &d, type, tag, &dr, nullptr);
            if (!e.empty()) fail(e + "\n---- nodevold log ----\n" + ReadFile(d.log));
          } else {
            if (o.pause_daemon) Pause(&d);
            std::string e = HandRoundOnce(o, hand, type, tag, &hr);
            if (!e.empty()) fail(e);
          }
        }
        if (rc) break;
        double dt = 0, ht = 0;
        for (int op = 0; op < kOps; ++op) {
          dt += dr.ms[op];
          ht += hr.ms[op];
        }
        std::fprintf(stderr, "lvm_bench: %-6s %-5s nodevold %7.0f ms (%s)  by hand %7.0f ms  ratio %.3f\n",
                     timed ? ("round " + std::to_string(r)).c_str() : "warmup", type.c_str(), dt,
                     (Ms(dr.ms[0]) + "/" + Ms(dr.ms[1]) + "/" + Ms(dr.ms[2]) + "/" + Ms(dr.ms[3])).c_str(), ht,
                     dt / ht);
        if (timed) {
          rep.data[type].daemon.push_back(dr);
          rep.data[type].hand.push_back(hr);
        }
      }
      if (rc) break;
      // Floors: one lvm fullreport as nodevold runs it, lvm version, an empty script.
      if (o.pause_daemon) Pause(&d);
      double ms = 0, wall = 0;
      std::string e = RunScript(o, hand, {"report"}, &ms, nullptr, nullptr);
      if (e.empty() && timed) rep.report_ms.push_back(ms);
      if (e.empty()) e = RunScript(o, hand, {"lvm-floor"}, &ms, nullptr, nullptr);
      if (e.empty() && timed) rep.floor_ms.push_back(ms);
      if (e.empty()) e = RunScript(o, hand, {"noop"}, &ms, &wall, nullptr);
      if (e.empty() && timed) rep.noop_wall_ms.push_back(wall);
      if (!e.empty()) fail(e);
    }
    if (rc || g_stop) break;
    int st = StopDaemon(&d);
    if (st != 0) {
      fail("nodevold exited with status " + std::to_string(st) + "\n" + ReadFile(d.log));
      break;
    }
    if (o.count_rounds > 0) {
      std::string e = CountingPass(o, root, hand, &rep.count);
      if (!e.empty()) fail("counting pass: " + e);
    }
  } while (false);

  if (d.pid > 0) StopDaemon(&d);
  int left = UnmountBelow(root);
  if (left != 0) std::fprintf(stderr, "lvm_bench: %d mounts could not be removed below %s\n", left, root.c_str());
  if (o.keep_sandbox || left != 0 || rc != 0) {
    std::fprintf(stderr, "lvm_bench: sandbox kept at %s\n", root.c_str());
  } else {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  if (g_stop && rc == 0) {
    std::fprintf(stderr, "lvm_bench: interrupted\n");
    return 130;
  }
  if (rc) return rc;
  rep.total_s = std::chrono::duration<double>(Clock::now() - run_start).count();
  if (o.snapshots) PrintSnapshotReport(o, rep, snap_daemon, snap_hand);
  else PrintReport(o, rep);
  return 0;
}
