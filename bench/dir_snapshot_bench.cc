// dir_snapshot_bench: what a dir pool's snapshot, restore and snapshot
// delete cost through nodevold, against the same copy made by hand.
//
// A volume is filled with a tree: --dirs directories of --files-per-dir
// files of --file-size bytes each, plus one file of --big-mib MiB. Then,
// per round, alternating which goes first:
//   nodevold   CreateSnapshot (a copy into <pool>/.snapshots, synced),
//              CreateVolume from it (a restore: a copy, synced),
//              DeleteSnapshot and DeleteVolume (rename, then removal);
//   by hand    `cp -a --reflink=auto SRC DST` then `sync -f DST` (the same
//              copy and the same durability), twice, and `rm -rf` twice.
// Both copy the same tree on the same filesystem (--work-dir: put it on the
// filesystem to measure; xfs with reflink shares blocks, ext4 copies
// bytes). Must run as root. Markdown on stdout, progress on stderr.
//
//   sudo build/bench/dir_snapshot_bench [--work-dir=/var/tmp] [--rounds=5]
//        [--dirs=50] [--files-per-dir=200] [--file-size=4096] [--big-mib=256]
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "nodevol/v1/node.grpc.pb.h"
#include "bench_util.h"
#include "spawn_daemon.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;
namespace v1 = nodevol::v1;

struct Options {
  std::string nodevold = NODEVOLD_PATH;
  std::string work_dir = "/var/tmp";
  int rounds = 5, dirs = 50, files_per_dir = 200, file_size = 4096, big_mib = 256;
};

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](const char* name, std::string* out) {
      std::string p = std::string("--") + name + "=";
      if (a.rfind(p, 0) != 0) return false;
      *out = a.substr(p.size());
      return true;
    };
    std::string v;
    if (val("nodevold", &o->nodevold) || val("work-dir", &o->work_dir)) continue;
    if (val("rounds", &v)) o->rounds = std::stoi(v);
    else if (val("dirs", &v)) o->dirs = std::stoi(v);
    else if (val("files-per-dir", &v)) o->files_per_dir = std::stoi(v);
    else if (val("file-size", &v)) o->file_size = std::stoi(v);
    else if (val("big-mib", &v)) o->big_mib = std::stoi(v);
    else {
      std::fprintf(stderr,
                   "usage: dir_snapshot_bench [--work-dir=DIR] [--rounds=N] [--dirs=N] [--files-per-dir=N] "
                   "[--file-size=BYTES] [--big-mib=N] [--nodevold=PATH]\n");
      return false;
    }
  }
  return true;
}

// Runs argv (no shell); true on exit 0.
bool Run(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  if (posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0) return false;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

double Ms(Clock::time_point since) { return std::chrono::duration<double, std::milli>(Clock::now() - since).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

using bench::FsType;

class Daemon {
 public:
  Daemon(const Options& o, const std::string& root) : o_(o), root_(root) {}
  ~Daemon() { Stop(); }
  bool Start(std::string* err) {
    fs::create_directories(root_ + "/pods");
    fs::create_directories(root_ + "/pool");
    std::ofstream(root_ + "/conf").close();
    std::vector<std::string> argv = {o_.nodevold, "--config=" + root_ + "/conf", "--socket=" + root_ + "/sock",
                                     "--state-dir=" + root_ + "/state", "--pods-root=" + root_ + "/pods",
                                     "--pool=name=bench,backend=dir,path=" + root_ + "/pool",
                                     "--metrics-address=off", "--log-target=stderr", "--log-level=warn"};
    if (int rc = SpawnDaemon(argv, root_ + "/nodevold.log", &pid_); rc != 0) {
      *err = "cannot start " + o_.nodevold + ": " + std::strerror(rc);
      return false;
    }
    stub_ = v1::Node::NewStub(grpc::CreateChannel("unix:" + root_ + "/sock", grpc::InsecureChannelCredentials()));
    for (int i = 0; i < 200; ++i) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
      ctx.set_wait_for_ready(true);
      v1::GetInfoResponse r;
      if (stub_->GetInfo(&ctx, {}, &r).ok()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    *err = "nodevold did not answer; see " + root_ + "/nodevold.log";
    return false;
  }
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  template <typename Req, typename Resp>
  grpc::Status Call(grpc::Status (v1::Node::Stub::*m)(grpc::ClientContext*, const Req&, Resp*), const Req& req) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(10));
    Resp resp;
    return (stub_.get()->*m)(&ctx, req, &resp);
  }
  grpc::Status Create(const std::string& name, const std::string& from_snapshot = "") {
    v1::CreateVolumeRequest r;
    r.set_name(name);
    r.set_pool("bench");
    r.set_size_bytes(1ull << 30);  // recorded; the pool has no quotas here
    r.set_from_snapshot(from_snapshot);
    return Call(&v1::Node::Stub::CreateVolume, r);
  }
  grpc::Status DeleteVolume(const std::string& name) {
    v1::DeleteVolumeRequest r;
    r.set_name(name);
    return Call(&v1::Node::Stub::DeleteVolume, r);
  }
  grpc::Status Snapshot(const std::string& name, const std::string& source) {
    v1::CreateSnapshotRequest r;
    r.set_name(name);
    r.set_source_volume(source);
    return Call(&v1::Node::Stub::CreateSnapshot, r);
  }
  grpc::Status DeleteSnapshot(const std::string& name) {
    v1::DeleteSnapshotRequest r;
    r.set_name(name);
    return Call(&v1::Node::Stub::DeleteSnapshot, r);
  }
  std::string Pool() const { return root_ + "/pool"; }

 private:
  const Options& o_;
  std::string root_;
  pid_t pid_ = -1;
  std::unique_ptr<v1::Node::Stub> stub_;
};

void Fill(const std::string& dir, const Options& o) {
  std::string block(static_cast<size_t>(o.file_size), 'n');
  for (int d = 0; d < o.dirs; ++d) {
    std::string sub = dir + "/d" + std::to_string(d);
    fs::create_directories(sub);
    for (int f = 0; f < o.files_per_dir; ++f) std::ofstream(sub + "/f" + std::to_string(f)) << block;
  }
  std::ofstream big(dir + "/big", std::ios::binary);
  std::string mib(1 << 20, '\0');
  for (int i = 0; i < o.big_mib; ++i) {
    for (size_t j = 0; j < mib.size(); j += 4096) mib[j] = static_cast<char>(i + j);  // not all zeros
    big.write(mib.data(), static_cast<std::streamsize>(mib.size()));
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) return 2;
  if (::geteuid() != 0) {
    std::fprintf(stderr, "dir_snapshot_bench: must run as root (copies keep owners)\n");
    return 2;
  }
  std::string tmpl = o.work_dir + "/dir-snapshot-bench-XXXXXX";
  if (!::mkdtemp(tmpl.data())) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string root = tmpl;
  Daemon d(o, root);
  std::string err;
  if (!d.Start(&err)) {
    std::fprintf(stderr, "dir_snapshot_bench: %s\n", err.c_str());
    return 1;
  }
  auto fail = [&](const std::string& what) {
    std::fprintf(stderr, "dir_snapshot_bench: %s\n", what.c_str());
    d.Stop();
    return 1;
  };
  if (grpc::Status st = d.Create("src"); !st.ok()) return fail("CreateVolume src: " + st.error_message());
  const std::string src = d.Pool() + "/src";
  std::fprintf(stderr, "filling %s: %d files of %d bytes in %d dirs, one of %d MiB\n", src.c_str(),
               o.dirs * o.files_per_dir, o.file_size, o.dirs, o.big_mib);
  Fill(src, o);
  Run({"sync", "-f", src});
  const std::string hand = root + "/by-hand";
  fs::create_directories(hand);

  std::map<std::string, std::vector<double>> ms;
  for (int round = 0; round < o.rounds; ++round) {
    auto nodevold = [&] {
      auto t = Clock::now();
      if (grpc::Status st = d.Snapshot("s", "src"); !st.ok()) return "CreateSnapshot: " + st.error_message();
      ms["nodevold snapshot"].push_back(Ms(t));
      t = Clock::now();
      if (grpc::Status st = d.Create("r", "s"); !st.ok()) return "CreateVolume from s: " + st.error_message();
      ms["nodevold restore"].push_back(Ms(t));
      t = Clock::now();
      if (grpc::Status st = d.DeleteSnapshot("s"); !st.ok()) return "DeleteSnapshot: " + st.error_message();
      ms["nodevold delete snapshot"].push_back(Ms(t));
      t = Clock::now();
      if (grpc::Status st = d.DeleteVolume("r"); !st.ok()) return "DeleteVolume r: " + st.error_message();
      ms["nodevold delete restore"].push_back(Ms(t));
      return std::string();
    };
    auto by_hand = [&] {
      const std::string snap = hand + "/snap", rest = hand + "/restore";
      auto t = Clock::now();
      if (!Run({"cp", "-a", "--reflink=auto", src, snap}) || !Run({"sync", "-f", snap})) return std::string("cp 1");
      ms["by hand snapshot"].push_back(Ms(t));
      t = Clock::now();
      if (!Run({"cp", "-a", "--reflink=auto", snap, rest}) || !Run({"sync", "-f", rest})) return std::string("cp 2");
      ms["by hand restore"].push_back(Ms(t));
      t = Clock::now();
      if (!Run({"rm", "-rf", snap})) return std::string("rm 1");
      ms["by hand delete snapshot"].push_back(Ms(t));
      t = Clock::now();
      if (!Run({"rm", "-rf", rest})) return std::string("rm 2");
      ms["by hand delete restore"].push_back(Ms(t));
      return std::string();
    };
    std::vector<std::function<std::string()>> order = {nodevold, by_hand};
    if (round % 2) std::swap(order[0], order[1]);
    for (auto& f : order)
      if (std::string e = f(); !e.empty()) return fail(e);
    std::fprintf(stderr, "round %d/%d done\n", round + 1, o.rounds);
  }
  d.DeleteVolume("src");
  d.Stop();

  struct utsname u;
  ::uname(&u);
  const double mib = (o.dirs * o.files_per_dir * static_cast<double>(o.file_size)) / (1 << 20) + o.big_mib;
  std::printf("dir_snapshot_bench: %s, kernel %s, %d rounds; tree: %d files of %d bytes in %d dirs + one of %d MiB "
              "(%.0f MiB)\n\n",
              FsType(root).c_str(), u.release, o.rounds, o.dirs * o.files_per_dir, o.file_size, o.dirs, o.big_mib,
              mib);
  std::printf("| step (median ms) | nodevold | by hand (cp -a --reflink=auto; sync -f / rm -rf) | ratio |\n");
  std::printf("|---|---:|---:|---:|\n");
  for (const char* step : {"snapshot", "restore", "delete snapshot", "delete restore"}) {
    double n = Median(ms[std::string("nodevold ") + step]), h = Median(ms[std::string("by hand ") + step]);
    std::printf("| %s | %.0f | %.0f | %.2fx |\n", step, n, h, h > 0 ? n / h : 0);
  }
  fs::remove_all(root);
  return 0;
}
