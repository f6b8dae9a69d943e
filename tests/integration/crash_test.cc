// Crash test: kill -9 nodevold at many points inside a stream of
// create/publish/unpublish/delete calls, restart it, and check that the
// records, the directories and the mount table agree and that nothing was
// lost or leaked.
//
// Workers (NODEVOL_CRASH_THREADS, default 2) each stream operations on their
// own volumes and pods, chosen by a seeded RNG, and keep a client-side model:
// what they *know* succeeded (an OK reply) and the one operation that was in
// flight (sent, no reply) when the kill landed. The main thread kills the
// daemon a random 0-30 ms after the k-th call of the round was sent, restarts
// it (sometimes killing it once more in the middle of its own recovery),
// checks the invariants, retries every in-flight operation (it must succeed:
// idempotency) and checks again.
//
// Knobs: NODEVOL_CRASH_SEED (printed on every run), NODEVOL_CRASH_ROUNDS
// (default 100), NODEVOL_CRASH_THREADS (default 2).
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "daemon_fixture.h"
#include "mount/mount_table.h"

extern char** environ;

namespace nodevol::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kSize = 1 << 20;

// Reconcile findings (of Check's kExpected) a full run must show: the
// frequent ones each at least once; the rare ones (an interrupted create or
// publish: a few per 100 rounds, flags restored about once) at least once
// together, so that the minimum cannot fail by chance (each also has a
// deterministic test below).
constexpr const char* kMustSee[] = {"finished deleting ", "finished unpublishing "};
constexpr const char* kRare[] = {"was being created when nodevold stopped",
                                 "was interrupted before mounting; rolled back", "mount flags restored as recorded"};

int EnvInt(const char* name, int def) {
  const char* v = getenv(name);
  return v && *v ? std::atoi(v) : def;
}

uint64_t Seed() {
  if (const char* v = getenv("NODEVOL_CRASH_SEED"); v && *v) return std::strtoull(v, nullptr, 0);
  return std::random_device()() ^ (static_cast<uint64_t>(Clock::now().time_since_epoch().count()) << 16);
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  *out = std::string(std::istreambuf_iterator<char>(in), {});
  return true;
}

bool WriteFile(const std::string& path, const std::string& contents) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool ok = ::write(fd, contents.data(), contents.size()) == static_cast<ssize_t>(contents.size());
  return ::close(fd) == 0 && ok;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

std::chrono::system_clock::time_point Deadline(int seconds = 10) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

// Codes a call gets when the daemon dies under it (or is dead).
bool TransportError(grpc::StatusCode c) {
  return c == grpc::StatusCode::UNAVAILABLE || c == grpc::StatusCode::CANCELLED ||
         c == grpc::StatusCode::UNKNOWN || c == grpc::StatusCode::INTERNAL ||
         c == grpc::StatusCode::DEADLINE_EXCEEDED;
}

std::string Str(const grpc::Status& s) {
  return std::to_string(static_cast<int>(s.error_code())) + " " + s.error_message();
}

// ------------------------------------------------------------------ model

enum class OpKind { kCreate, kDelete, kPublish, kPublishInline, kUnpublish };

struct Op {
  OpKind kind;
  std::string volume;  // for kPublishInline: the name the daemon derives
  std::string target;
  bool read_only = false;
  bool hardened = false;  // mount_options nosuid, nodev, noexec

  std::string Describe() const {
    switch (kind) {
      case OpKind::kCreate: return "CreateVolume " + volume;
      case OpKind::kDelete: return "DeleteVolume " + volume;
      case OpKind::kPublish:
        return "Publish " + volume + " at " + target + (read_only ? " (ro" : " (rw") +
               (hardened ? ", nosuid,nodev,noexec)" : ")");
      case OpKind::kPublishInline:
        return "Publish inline " + volume + " at " + target + (hardened ? " (nosuid,nodev,noexec)" : "");
      case OpKind::kUnpublish: return "Unpublish " + target + " (volume " + volume + ")";
    }
    return "?";
  }
};

struct VolM {
  bool ephemeral = false;
  std::map<std::string, std::string> markers;  // file in the volume dir -> contents
};

struct PubM {
  std::string volume;
  bool read_only = false;
  bool ephemeral = false;
  bool hardened = false;
};

// What one worker knows. Only its own thread touches it while the daemon
// runs; the main thread reads and updates it between rounds.
struct Model {
  int id = 0;
  std::mt19937_64 rng;
  int next_vol = 0, next_pod = 0, next_marker = 0;
  std::map<std::string, VolM> vols;         // CreateVolume (or inline Publish) returned OK
  std::map<std::string, PubM> pubs;         // by target: Publish returned OK
  std::set<std::string> gone_vols;          // DeleteVolume (or inline Unpublish) returned OK
  std::set<std::string> gone_targets;       // Unpublish returned OK
  std::optional<Op> inflight;               // sent, no reply when the kill landed
  std::optional<Op> last_ok;                // repeated now and then (idempotency)
  std::string failure;                      // an unexpected answer while the daemon lived
  int ops_ok = 0, repeats = 0;
};

class CrashTest : public DaemonFixture {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    pods_real_ = fs::canonical(pods_root_).string();
  }

  std::string Target(const std::string& pod, const std::string& name, bool create = true) {
    MakeTarget(pod, name, create);
    return pods_real_ + "/" + pod + "/volumes/nodevol.io~volume/" + name;
  }

  // ---------------------------------------------------------------- calls

  grpc::Status Execute(v1::Node::Stub* stub, const Op& op, std::string* detail) {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    switch (op.kind) {
      case OpKind::kCreate: {
        v1::CreateVolumeRequest req;
        req.set_name(op.volume);
        req.set_pool("default");
        req.set_size_bytes(kSize);
        v1::CreateVolumeResponse resp;
        grpc::Status s = stub->CreateVolume(&ctx, req, &resp);
        if (s.ok() && resp.volume().state() != v1::VOLUME_STATE_READY)
          *detail = "CreateVolume returned OK with state " + std::to_string(resp.volume().state());
        return s;
      }
      case OpKind::kDelete: {
        v1::DeleteVolumeRequest req;
        req.set_name(op.volume);
        v1::DeleteVolumeResponse resp;
        return stub->DeleteVolume(&ctx, req, &resp);
      }
      case OpKind::kPublish:
      case OpKind::kPublishInline: {
        v1::PublishRequest req;
        if (op.kind == OpKind::kPublish) {
          req.set_volume(op.volume);
        } else {
          req.mutable_inline_()->set_pool("default");
          req.mutable_inline_()->set_size_bytes(kSize);
        }
        req.set_target(op.target);
        req.set_read_only(op.read_only);
        if (op.hardened)
          for (const char* o : {"nosuid", "nodev", "noexec"}) req.add_mount_options(o);
        v1::PublishResponse resp;
        grpc::Status s = stub->Publish(&ctx, req, &resp);
        if (s.ok() && (resp.volume() != op.volume || resp.target() != op.target))
          *detail = "Publish answered volume " + resp.volume() + " target " + resp.target();
        return s;
      }
      case OpKind::kUnpublish: {
        v1::UnpublishRequest req;
        req.set_target(op.target);
        v1::UnpublishResponse resp;
        return stub->Unpublish(&ctx, req, &resp);
      }
    }
    return grpc::Status(grpc::StatusCode::INTERNAL, "bad op");
  }

  // Records an OK reply in the model (and writes a marker through a fresh
  // read-write publication). Returns "" or what went wrong client-side.
  std::string Apply(Model* m, const Op& op) {
    switch (op.kind) {
      case OpKind::kCreate:
        m->vols[op.volume];  // a repeat keeps the markers
        break;
      case OpKind::kDelete:
        m->vols.erase(op.volume);
        m->gone_vols.insert(op.volume);
        break;
      case OpKind::kPublish:
      case OpKind::kPublishInline: {
        bool inl = op.kind == OpKind::kPublishInline;
        VolM& v = m->vols[op.volume];
        v.ephemeral = inl;
        m->pubs[op.target] = {op.volume, op.read_only, inl, op.hardened};
        if (!op.read_only) {
          std::string file = "marker-" + std::to_string(m->id) + "-" + std::to_string(m->next_marker++);
          std::string contents = op.volume + " via " + op.target + "\n";
          if (!WriteFile(op.target + "/" + file, contents))
            return "cannot write " + op.target + "/" + file + " after " + op.Describe() + ": " + strerror(errno);
          v.markers[file] = contents;
        }
        break;
      }
      case OpKind::kUnpublish: {
        auto it = m->pubs.find(op.target);
        if (it == m->pubs.end()) break;  // a repeat
        if (it->second.ephemeral) {
          m->vols.erase(it->second.volume);
          m->gone_vols.insert(it->second.volume);
        }
        m->pubs.erase(it);
        m->gone_targets.insert(op.target);
        break;
      }
    }
    ++m->ops_ok;
    return "";
  }

  // Picks the next operation from the model, deterministically from its RNG.
  Op NextOp(Model* m) {
    std::vector<std::string> persistent, deletable, publishable;
    int ephemeral = 0;
    std::map<std::string, int> pub_count;
    for (const auto& [t, p] : m->pubs) ++pub_count[p.volume];
    for (const auto& [name, v] : m->vols) {
      if (v.ephemeral) {
        ++ephemeral;
        continue;
      }
      persistent.push_back(name);
      if (pub_count[name] == 0) deletable.push_back(name);
      if (pub_count[name] < 2) publishable.push_back(name);
    }
    std::vector<std::string> targets;
    for (const auto& [t, _] : m->pubs) targets.push_back(t);

    enum Choice { kCreateC, kPublishC, kInlineC, kUnpublishC, kDeleteC, kRepeatC };
    std::vector<std::pair<Choice, int>> w = {
        {kCreateC, persistent.size() < 5 ? 3 : 0},
        {kPublishC, publishable.empty() ? 0 : 3},
        {kInlineC, ephemeral < 2 ? 1 : 0},
        {kUnpublishC, targets.empty() ? 0 : 3},
        {kDeleteC, deletable.empty() ? 0 : 1},
        {kRepeatC, m->last_ok ? 1 : 0},
    };
    int total = 0;
    for (auto& [_, n] : w) total += n;
    int r = static_cast<int>(m->rng() % total);
    Choice c = kCreateC;
    for (auto& [ch, n] : w) {
      if (r < n) {
        c = ch;
        break;
      }
      r -= n;
    }
    auto pick = [&](const std::vector<std::string>& v) { return v[m->rng() % v.size()]; };
    std::string pfx = "w" + std::to_string(m->id) + "-";
    switch (c) {
      case kCreateC:
        return {OpKind::kCreate, pfx + "v" + std::to_string(m->next_vol++), "", false};
      case kPublishC: {
        std::string pod = pfx + "pod" + std::to_string(m->next_pod++);
        // kubelet makes the target dir before it calls mount (Publish
        // refuses a missing one).
        std::string t = Target(pod, "data");
        std::string v = pick(publishable);
        bool ro = m->rng() % 3 == 0;
        return {OpKind::kPublish, v, t, ro, m->rng() % 3 == 0};
      }
      case kInlineC: {
        std::string pod = pfx + "epod" + std::to_string(m->next_pod++);
        std::string t = Target(pod, "scratch");
        return {OpKind::kPublishInline, "ephemeral-" + pod + "-scratch", t, false, m->rng() % 3 == 0};
      }
      case kUnpublishC: {
        std::string t = pick(targets);
        return {OpKind::kUnpublish, m->pubs[t].volume, t, false};
      }
      case kDeleteC:
        return {OpKind::kDelete, pick(deletable), "", false};
      case kRepeatC:
        ++m->repeats;
        return *m->last_ok;
    }
    return {OpKind::kCreate, pfx + "v" + std::to_string(m->next_vol++), "", false};
  }

  // ---------------------------------------------------------------- round

  void Worker(Model* m) {
    std::unique_ptr<v1::Node::Stub> stub = NewStub();
    while (!killed_.load()) {
      Op op = NextOp(m);
      {
        std::lock_guard<std::mutex> l(mu_);
        ++sent_;
      }
      cv_.notify_all();
      std::string detail;
      grpc::Status s = Execute(stub.get(), op, &detail);
      if (s.ok()) {
        if (detail.empty()) detail = Apply(m, op);
        if (!detail.empty()) {
          m->failure = detail;
          return;
        }
        m->last_ok = op;
        continue;
      }
      if (killed_.load() && TransportError(s.error_code())) {
        m->inflight = op;
        return;
      }
      m->failure = op.Describe() + " failed while the daemon was up: " + Str(s);
      return;
    }
  }

  // Runs the workers, kills the daemon a random delay after the k-th call
  // of the round was sent, and joins them.
  void RunAndKill(std::vector<Model>* models, std::mt19937_64* rng, std::string* what) {
    int k = static_cast<int>((*rng)() % 12) + 1;
    // Half the kills land within 3 ms of a call (inside it), the rest later.
    int delay_us = (*rng)() % 2 ? static_cast<int>((*rng)() % 3000) : static_cast<int>((*rng)() % 30000);
    killed_ = false;
    sent_ = 0;
    std::vector<std::thread> threads;
    for (Model& m : *models) threads.emplace_back([this, &m] { Worker(&m); });
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait_for(l, std::chrono::seconds(20), [&] { return sent_ >= k; });
    }
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    killed_ = true;
    KillDaemon();
    for (std::thread& t : threads) t.join();
    *what = "kill after call " + std::to_string(k) + " + " + std::to_string(delay_us) + " us";
  }

  // Starts nodevold as the fixture does and SIGKILLs it delay_us after it
  // logs "starting", typically in the middle of its start-up reconcile.
  // Returns whether the kill landed between "starting" and "ready" in the log.
  bool StartAndKillDuringRecovery(int delay_us) {
    std::string before;
    ReadFile(log_path_, &before);
    pid_t pid = SpawnDaemon();
    EXPECT_GT(pid, 0);
    if (pid <= 0) return false;
    // Wait for its first log line, then give it delay_us to get into Start().
    auto until = Clock::now() + std::chrono::seconds(5);
    std::string log;
    while (Clock::now() < until && ReadFile(log_path_, &log) &&
           log.find(" starting: ", before.size()) == std::string::npos)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    std::string after;
    ReadFile(log_path_, &after);
    std::string added = after.substr(std::min(before.size(), after.size()));
    return added.find(" starting: ") != std::string::npos && added.find(" ready: ") == std::string::npos;
  }

  // ---------------------------------------------------------------- checks

  // Checks every invariant against the models; in-flight operations may be
  // done or not done, never half. Returns the violations.
  std::vector<std::string> Check(const std::vector<Model>& models, bool count_drift = false) {
    std::vector<std::string> errs;
    auto err = [&](const std::string& e) { errs.push_back(e); };

    std::map<std::string, const VolM*> known;
    std::map<std::string, const PubM*> known_pubs;
    std::set<std::string> gone_vols, gone_targets;
    std::map<std::string, const Op*> op_on_vol, op_on_target;
    for (const Model& m : models) {
      for (const auto& [n, v] : m.vols) known[n] = &v;
      for (const auto& [t, p] : m.pubs) known_pubs[t] = &p;
      gone_vols.insert(m.gone_vols.begin(), m.gone_vols.end());
      gone_targets.insert(m.gone_targets.begin(), m.gone_targets.end());
      if (m.inflight) {
        op_on_vol[m.inflight->volume] = &*m.inflight;
        if (!m.inflight->target.empty()) op_on_target[m.inflight->target] = &*m.inflight;
      }
    }
    auto inflight = [](const std::map<std::string, const Op*>& ops, const std::string& key, OpKind kind) {
      auto it = ops.find(key);
      return it != ops.end() && it->second->kind == kind;
    };

    v1::ListVolumesResponse list;
    {
      grpc::ClientContext ctx;
      ctx.set_deadline(Deadline());
      grpc::Status s = stub()->ListVolumes(&ctx, v1::ListVolumesRequest(), &list);
      if (!s.ok()) return {"ListVolumes failed: " + Str(s)};
    }
    std::map<std::string, v1::Volume> listed;
    for (const v1::Volume& v : list.volumes()) listed[v.name()] = v;

    std::set<std::string> published;
    for (const auto& [name, v] : listed) {
      std::string dir = pool_dir_ + "/" + name;
      bool ready = v.state() == v1::VOLUME_STATE_READY;
      if (auto it = known.find(name); it != known.end()) {
        if (!ready) err("volume " + name + " (created OK) is in state " + std::to_string(v.state()) + ", not READY");
        if (v.ephemeral() != it->second->ephemeral) err("volume " + name + ": ephemeral flag differs");
      } else if (inflight(op_on_vol, name, OpKind::kCreate)) {
        if (!ready && v.state() != v1::VOLUME_STATE_CREATING)
          err("volume " + name + " (create in flight) is in state " + std::to_string(v.state()));
      } else if (inflight(op_on_vol, name, OpKind::kPublishInline)) {
        // Kept even half-created (never deleted for want of a record): the
        // retried Publish finishes it, as a retried create does.
        if (!ready && v.state() != v1::VOLUME_STATE_CREATING)
          err("inline volume " + name + " (publish in flight) is in state " + std::to_string(v.state()));
      } else {
        err("volume " + name + " is listed but no CreateVolume/Publish for it succeeded or was in flight (leak)" +
            (gone_vols.count(name) ? "; its deletion had returned OK" : ""));
      }
      if (ready && !fs::is_directory(dir)) err("READY volume " + name + " has no directory " + dir);
      // An inline publish cut short keeps its volume (absence of a record
      // is never leave to delete); its retry publishes it.
      if (v.ephemeral() && v.published_at().empty() && !inflight(op_on_vol, name, OpKind::kPublishInline))
        err("inline volume " + name + " exists unpublished");
      struct stat vs = {};
      bool have_dir = ::stat(dir.c_str(), &vs) == 0;
      for (const std::string& t : v.published_at()) {
        published.insert(t);
        auto kp = known_pubs.find(t);
        bool pending = inflight(op_on_target, t, OpKind::kPublish) || inflight(op_on_target, t, OpKind::kPublishInline);
        if (kp == known_pubs.end() && !pending)
          err("target " + t + " of " + name + " is published but no Publish to it succeeded or was in flight");
        if (kp != known_pubs.end() && kp->second->volume != name)
          err("target " + t + " shows volume " + name + ", Publish put " + kp->second->volume + " there");
        if (gone_targets.count(t)) err("target " + t + " is published again after its Unpublish returned OK");
        if (!IsMountPoint(t)) {
          err("target " + t + " of " + name + " is recorded but not a mount point");
          continue;
        }
        struct stat ts = {};
        if (::stat(t.c_str(), &ts) != 0 || !have_dir || ts.st_dev != vs.st_dev || ts.st_ino != vs.st_ino)
          err("mount at " + t + " does not show " + dir);
        bool want_ro = kp != known_pubs.end() ? kp->second->read_only
                                              : (pending ? op_on_target.at(t)->read_only : false);
        bool want_hardened = kp != known_pubs.end() ? kp->second->hardened
                                                    : (pending ? op_on_target.at(t)->hardened : false);
        struct statvfs sv = {};
        if (::statvfs(t.c_str(), &sv) != 0) {
          err("statvfs " + t + ": " + strerror(errno));
          continue;
        }
        if (((sv.f_flag & ST_RDONLY) != 0) != want_ro)
          err("mount at " + t + " is " + ((sv.f_flag & ST_RDONLY) ? "read-only" : "read-write") +
              ", published " + (want_ro ? "read-only" : "read-write"));
        constexpr unsigned long kHard = ST_NOSUID | ST_NODEV | ST_NOEXEC;
        if (want_hardened && (sv.f_flag & kHard) != kHard)
          err("mount at " + t + " lacks some of nosuid,nodev,noexec it was published with (statvfs flags 0x" +
              [&] { std::ostringstream o; o << std::hex << sv.f_flag; return o.str(); }() + ")");
      }
    }

    for (const auto& [name, vm] : known) {
      if (!listed.count(name)) {
        bool may_be_gone = inflight(op_on_vol, name, OpKind::kDelete);
        for (const auto& [t, p] : known_pubs)
          if (p->volume == name && p->ephemeral && inflight(op_on_target, t, OpKind::kUnpublish)) may_be_gone = true;
        if (!may_be_gone) err("volume " + name + " (created OK, never deleted) is missing from ListVolumes");
        else if (Exists(pool_dir_ + "/" + name)) err("volume " + name + " is gone from ListVolumes but its dir is left");
        continue;
      }
      for (const auto& [file, contents] : vm->markers) {
        std::string got;
        if (!ReadFile(pool_dir_ + "/" + name + "/" + file, &got)) err("volume " + name + " lost " + file);
        else if (got != contents) err("volume " + name + ": " + file + " has other contents");
      }
    }
    for (const auto& [t, p] : known_pubs) {
      auto it = listed.find(p->volume);
      bool there = false;
      if (it != listed.end())
        for (const std::string& x : it->second.published_at()) there |= x == t;
      if (!there && !inflight(op_on_target, t, OpKind::kUnpublish))
        err("publication of " + p->volume + " at " + t + " (Publish returned OK) is gone");
    }
    for (const std::string& name : gone_vols) {
      if (listed.count(name)) continue;  // reported above
      if (Exists(pool_dir_ + "/" + name)) err("deleted volume " + name + " still has its dir");
    }

    // The kernel's mount table: every mount in the sandbox is a publication.
    MountTable table;
    if (Status s = table.Load(); !s.ok()) {
      err("cannot read the mount table: " + s.message());
    } else {
      std::map<std::string, int> seen;
      for (const MountEntry* e : table.Below(root_)) {
        if (++seen[e->target] == 2) err("target " + e->target + " has stacked mounts");
        if (!published.count(e->target)) err("mount at " + e->target + " is in no volume's published_at (leak)");
      }
    }

    // The pool holds exactly the listed volumes.
    for (const auto& e : fs::directory_iterator(pool_dir_)) {
      std::string n = e.path().filename().string();
      if (n.rfind(".deleting-", 0) == 0) err("pool dir holds " + n + " after reconcile");
      else if (!listed.count(n)) err("pool dir holds " + n + ", which is no listed volume (leak)");
    }

    // The state dir: one record per volume and per publication, no debris.
    int vol_records = 0, pub_records = 0;
    for (const char* sub : {"volumes", "publications"}) {
      for (const auto& e : fs::directory_iterator(state_dir_ + "/" + sub)) {
        std::string n = e.path().filename().string();
        if (n.rfind(".tmp-", 0) == 0 || n.size() < 5 || n.substr(n.size() - 5) != ".json") {
          err("state/" + std::string(sub) + " holds " + n);
          continue;
        }
        ++(std::string(sub) == "volumes" ? vol_records : pub_records);
      }
    }
    if (vol_records != static_cast<int>(listed.size()))
      err(std::to_string(vol_records) + " volume records for " + std::to_string(listed.size()) + " listed volumes");
    if (pub_records != static_cast<int>(published.size()))
      err(std::to_string(pub_records) + " publication records for " + std::to_string(published.size()) +
          " published targets");

    // Reconcile reports what it finished; anything else is a surprise.
    v1::GetInfoResponse info;
    {
      grpc::ClientContext ctx;
      ctx.set_deadline(Deadline());
      grpc::Status s = stub()->GetInfo(&ctx, v1::GetInfoRequest(), &info);
      if (!s.ok()) err("GetInfo failed: " + Str(s));
    }
    static const char* kExpected[] = {"finished deleting ", "was being created when nodevold stopped",
                                      "was interrupted before mounting; rolled back", "finished unpublishing ",
                                      "mount flags restored as recorded",
                                      "was interrupted after mounting; unmounted and rolled back",
                                      "has no publication; kept"};
    for (const std::string& d : info.drift()) {
      bool ok = d.find("could not") == std::string::npos && d.find("failed") == std::string::npos;
      bool expected = false;
      for (const char* e : kExpected) expected |= d.find(e) != std::string::npos;
      if (!ok || !expected) err("unexpected drift: " + d);
      if (count_drift)
        for (const char* e : kExpected)
          if (d.find(e) != std::string::npos) ++drift_seen_[e];
    }
    return errs;
  }

  // How each in-flight call ended up after the restart: 0 not done, 1 done,
  // 2 half (a volume left CREATING, which a retry finishes); with its kind.
  std::vector<std::pair<OpKind, int>> Outcomes(const std::vector<Model>& models) {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    v1::ListVolumesResponse list;
    stub()->ListVolumes(&ctx, v1::ListVolumesRequest(), &list);
    std::map<std::string, const v1::Volume*> listed;
    std::set<std::string> published;
    for (const v1::Volume& v : list.volumes()) {
      listed[v.name()] = &v;
      published.insert(v.published_at().begin(), v.published_at().end());
    }
    std::vector<std::pair<OpKind, int>> out;
    for (const Model& m : models) {
      if (!m.inflight) continue;
      const Op& op = *m.inflight;
      switch (op.kind) {
        case OpKind::kCreate:
          out.emplace_back(op.kind, !listed.count(op.volume)                                   ? 0
                                       : listed[op.volume]->state() == v1::VOLUME_STATE_READY ? 1
                                                                                              : 2);
          break;
        case OpKind::kDelete: out.emplace_back(op.kind, listed.count(op.volume) ? 0 : 1); break;
        case OpKind::kPublish:
        case OpKind::kPublishInline: out.emplace_back(op.kind, published.count(op.target) ? 1 : 0); break;
        case OpKind::kUnpublish: out.emplace_back(op.kind, published.count(op.target) ? 0 : 1); break;
      }
    }
    return out;
  }

  std::string Describe(const std::vector<Model>& models) {
    std::ostringstream o;
    for (const Model& m : models) {
      o << "  worker " << m.id << ": " << m.vols.size() << " volumes, " << m.pubs.size() << " publications";
      if (m.inflight) o << ", in flight: " << m.inflight->Describe();
      o << "\n";
    }
    return o.str();
  }

  std::string pods_real_;
  std::map<std::string, int> drift_seen_;  // reconcile findings by kind
  std::atomic<bool> killed_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  int sent_ = 0;
};

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += "  " + s + "\n";
  return out;
}

TEST_F(CrashTest, KillNineAnywhereLosesAndLeaksNothing) {
  const uint64_t seed = Seed();
  const int rounds = EnvInt("NODEVOL_CRASH_ROUNDS", 100);
  const int nthreads = std::max(1, EnvInt("NODEVOL_CRASH_THREADS", 2));
  std::cout << "crash test: seed=" << seed << " rounds=" << rounds << " threads=" << nthreads
            << " (rerun with NODEVOL_CRASH_SEED=" << seed << ")" << std::endl;
  SCOPED_TRACE("NODEVOL_CRASH_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::vector<Model> models(nthreads);
  for (int i = 0; i < nthreads; ++i) {
    models[i].id = i;
    models[i].rng.seed(seed * 1000003 + i);
  }

  StartDaemon();
  ASSERT_FALSE(HasFatalFailure());
  auto start = Clock::now();
  int inflight_total = 0, recovery_kills = 0;
  int outcome[3] = {0, 0, 0};
  int by_kind[5][3] = {};  // [OpKind][outcome]: where the kills landed, per operation
  int mid_start = 0;
  for (int round = 0; round < rounds; ++round) {
    std::string what;
    RunAndKill(&models, &rng, &what);
    std::string ctx = "round " + std::to_string(round) + " (" + what + ")";
    for (const Model& m : models) ASSERT_TRUE(m.failure.empty()) << ctx << ", worker " << m.id << ": " << m.failure;

    if (round % 3 == 1) {  // kill it once more while it recovers
      int delay_us = static_cast<int>(rng() % 4000);
      mid_start += StartAndKillDuringRecovery(delay_us);
      ASSERT_FALSE(HasFatalFailure());
      ctx += ", then killed " + std::to_string(delay_us) + " us after the restart logged \"starting\"";
      ++recovery_kills;
    }
    StartDaemon();
    ASSERT_FALSE(HasFatalFailure()) << ctx;

    std::vector<std::string> errs = Check(models, /*count_drift=*/true);
    ASSERT_TRUE(errs.empty()) << ctx << ", after restart:\n" << Describe(models) << Join(errs);

    for (auto [kind, o] : Outcomes(models)) {
      ++outcome[o];
      ++by_kind[static_cast<int>(kind)][o];
    }
    // Retry what was in flight: it must succeed and leave everything sound.
    for (Model& m : models) {
      if (!m.inflight) continue;
      ++inflight_total;
      Op op = *m.inflight;
      // A third of the interrupted creates are abandoned instead: DeleteVolume
      // must drop whatever the create left (CREATING, READY or nothing).
      if (op.kind == OpKind::kCreate && rng() % 3 == 0) op.kind = OpKind::kDelete;
      std::string detail;
      grpc::Status s = Execute(stub(), op, &detail);
      ASSERT_TRUE(s.ok()) << ctx << ": retry of in-flight " << m.inflight->Describe() << " (as " << op.Describe()
                          << ") failed: " << Str(s);
      ASSERT_EQ(detail, "") << ctx << ": retry of " << op.Describe();
      m.inflight.reset();
      std::string e = Apply(&m, op);
      ASSERT_EQ(e, "") << ctx;
      m.last_ok = op;
    }
    errs = Check(models);
    ASSERT_TRUE(errs.empty()) << ctx << ", after retrying in-flight calls:\n" << Describe(models) << Join(errs);
  }
  double secs = std::chrono::duration<double>(Clock::now() - start).count();
  int ops = 0, repeats = 0;
  for (const Model& m : models) ops += m.ops_ok, repeats += m.repeats;
  std::cout << "crash test: " << rounds << " kill/restart rounds (" << recovery_kills
            << " more kills during a restart, " << mid_start << " of them between \"starting\" and \"ready\"), " << ops << " calls OK (" << repeats << " repeats), "
            << inflight_total << " in flight at a kill (" << outcome[1] << " found done, " << outcome[0]
            << " not done, " << outcome[2] << " half-created and finished by the retry), " << secs << " s"
            << std::endl;
  // The kill points reached, per operation: before its commit point, after
  // it, and in between (a volume left CREATING; the other operations'
  // in-between states are the reconcile findings below).
  const char* kind_names[5] = {"CreateVolume", "DeleteVolume", "Publish", "Publish inline", "Unpublish"};
  std::cout << "crash test: kills inside a call, by operation (not done / half / done):";
  for (int k = 0; k < 5; ++k)
    std::cout << " " << kind_names[k] << " " << by_kind[k][0] << "/" << by_kind[k][2] << "/" << by_kind[k][1] << ";";
  std::cout << std::endl;
  std::cout << "crash test: reconcile findings:";
  for (const auto& [kind, n] : drift_seen_) std::cout << " [" << kind << "] x" << n;
  std::cout << std::endl;
  // A run counts only if it crashed where it claims to: kills that found
  // calls in flight, both before and after their commit point, restarts
  // killed again mid-recovery, and reconcile's recovery paths. With fewer
  // rounds (NODEVOL_CRASH_ROUNDS) only the in-flight kills are required.
  // One run of 100: 182 in flight (98 done, 80 not), 33 kills between
  // "starting" and "ready", deleting x26, unpublishing x48, creating x4,
  // rolled back x3, flags restored x1.
  EXPECT_GT(inflight_total, rounds / 4) << "too few kills landed inside a call";
  if (rounds >= 100) {
    EXPECT_GT(outcome[0], 0) << "no in-flight call was found not done after a kill";
    EXPECT_GT(outcome[1], 0) << "no in-flight call was found done after a kill";
    EXPECT_GT(mid_start, 0) << "no kill landed between \"starting\" and \"ready\"";
    for (const char* kind : kMustSee)
      EXPECT_GE(drift_seen_[kind], 1) << "reconcile never reported \"" << kind << "\": that recovery path was not exercised";
    int rare = 0;
    for (const char* kind : kRare) rare += drift_seen_[kind];
    EXPECT_GE(rare, 1) << "no interrupted create or publish was ever recovered";
  }

  // Tear everything down through the API: nothing may be left behind.
  for (Model& m : models) {
    std::vector<std::string> targets;
    for (const auto& [t, _] : m.pubs) targets.push_back(t);
    for (const std::string& t : targets) {
      Op op{OpKind::kUnpublish, m.pubs[t].volume, t, false};
      std::string detail;
      grpc::Status s = Execute(stub(), op, &detail);
      ASSERT_TRUE(s.ok()) << op.Describe() << ": " << Str(s);
      Apply(&m, op);
    }
    std::vector<std::string> names;
    for (const auto& [n, _] : m.vols) names.push_back(n);
    for (const std::string& n : names) {
      Op op{OpKind::kDelete, n, "", false};
      std::string detail;
      grpc::Status s = Execute(stub(), op, &detail);
      ASSERT_TRUE(s.ok()) << op.Describe() << ": " << Str(s);
      Apply(&m, op);
    }
  }
  std::vector<std::string> errs = Check(models);
  EXPECT_TRUE(errs.empty()) << "after cleanup:\n" << Join(errs);
  // And once more across a kill.
  KillDaemon();
  StartDaemon();
  ASSERT_FALSE(HasFatalFailure());
  errs = Check(models);
  EXPECT_TRUE(errs.empty()) << "after cleanup and a restart:\n" << Join(errs);
  EXPECT_EQ(MountsBelow(root_), 0);
  EXPECT_TRUE(fs::is_empty(pool_dir_));
  EXPECT_TRUE(fs::is_empty(state_dir_ + "/volumes"));
  EXPECT_TRUE(fs::is_empty(state_dir_ + "/publications"));
}

// ------------------------------------------------------------ targeted tests

using CrashRecovery = CrashTest;

std::vector<std::string> Drift(v1::Node::Stub* stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline());
  v1::GetInfoResponse info;
  EXPECT_TRUE(stub->GetInfo(&ctx, v1::GetInfoRequest(), &info).ok());
  return {info.drift().begin(), info.drift().end()};
}

std::set<std::string> Listed(v1::Node::Stub* stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline());
  v1::ListVolumesResponse list;
  EXPECT_TRUE(stub->ListVolumes(&ctx, v1::ListVolumesRequest(), &list).ok());
  std::set<std::string> out;
  for (const v1::Volume& v : list.volumes()) out.insert(v.name());
  return out;
}

TEST_F(CrashRecovery, TruncatedRecordIsMovedAsideAndReportedAndTheDaemonStarts) {
  StartDaemon();
  ASSERT_TRUE(CreateVolume("keep", kSize).ok());
  ASSERT_TRUE(CreateVolume("torn", kSize).ok());
  ASSERT_TRUE(WriteFile(pool_dir_ + "/torn/data", "precious\n"));
  KillDaemon();
  std::string rec = state_dir_ + "/volumes/torn.json", text;
  ASSERT_TRUE(ReadFile(rec, &text));
  ASSERT_TRUE(WriteFile(rec, text.substr(0, text.size() / 2)));
  ASSERT_TRUE(WriteFile(state_dir_ + "/volumes/garbage.json", "\x01\x02 not json"));

  StartDaemon();
  ASSERT_FALSE(HasFatalFailure());
  std::vector<std::string> drift = Drift(stub());
  for (const char* name : {"torn.json", "garbage.json"}) {
    std::string path = state_dir_ + "/volumes/" + name;
    EXPECT_FALSE(Exists(path)) << path;
    EXPECT_TRUE(Exists(path + ".corrupt")) << path << ".corrupt";
    bool reported = false;
    for (const std::string& d : drift) reported |= d.find(path) != std::string::npos && d.find(".corrupt") != std::string::npos;
    EXPECT_TRUE(reported) << name << " not in drift:\n" << Join(drift);
  }
  EXPECT_EQ(Listed(stub()), (std::set<std::string>{"keep"}));
  // Data of a volume whose record is unreadable is never deleted.
  std::string got;
  EXPECT_TRUE(ReadFile(pool_dir_ + "/torn/data", &got));
  EXPECT_EQ(got, "precious\n");
  // The daemon works: the intact volume publishes.
  std::string t = MakeTarget("pod-1", "data");
  EXPECT_TRUE(Publish("keep", t).ok());
  EXPECT_TRUE(IsMountPoint(t));
  EXPECT_TRUE(Unpublish(t).ok());
  // Another restart does not report the files set aside again as new problems.
  KillDaemon();
  StartDaemon();
  for (const std::string& d : Drift(stub())) EXPECT_EQ(d.find("unreadable"), std::string::npos) << d;
}

TEST_F(CrashRecovery, LeftoverTempFilesAreRemovedOnStart) {
  StartDaemon();
  ASSERT_TRUE(CreateVolume("v1", kSize).ok());
  std::string t = MakeTarget("pod-1", "data");
  ASSERT_TRUE(Publish("v1", t).ok());
  KillDaemon();
  // What a kill between write and rename leaves: a temp copy of a record.
  std::string rec;
  ASSERT_TRUE(ReadFile(state_dir_ + "/volumes/v1.json", &rec));
  ASSERT_TRUE(WriteFile(state_dir_ + "/volumes/.tmp-foo.json", rec));
  ASSERT_TRUE(WriteFile(state_dir_ + "/volumes/.tmp-v1.json", "{\"format\": 1, \"na"));
  ASSERT_TRUE(WriteFile(state_dir_ + "/publications/.tmp-0123.json", ""));

  StartDaemon();
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_FALSE(Exists(state_dir_ + "/volumes/.tmp-foo.json"));
  EXPECT_FALSE(Exists(state_dir_ + "/volumes/.tmp-v1.json"));
  EXPECT_FALSE(Exists(state_dir_ + "/publications/.tmp-0123.json"));
  EXPECT_TRUE(Drift(stub()).empty()) << Join(Drift(stub()));
  EXPECT_EQ(Listed(stub()), (std::set<std::string>{"v1"}));
  EXPECT_TRUE(IsMountPoint(t));
  EXPECT_TRUE(Unpublish(t).ok());
}

// Hand-made states of a kill in the middle of a delete and of a read-only
// publish: Start() must finish the delete and roll the publish back (the
// call never returned OK; its caller may have given up and gone).
TEST_F(CrashRecovery, HalfDoneDeleteIsFinishedAndHalfDonePublishRolledBackOnStart) {
  StartDaemon();
  ASSERT_TRUE(CreateVolume("doomed", kSize).ok());
  ASSERT_TRUE(CreateVolume("shared", kSize).ok());
  std::string t = MakeTarget("pod-1", "data");
  ASSERT_TRUE(Publish("shared", t, /*read_only=*/true).ok());
  KillDaemon();

  // Delete: the record says deleting and the dir is half renamed away.
  std::string rec;
  ASSERT_TRUE(ReadFile(state_dir_ + "/volumes/doomed.json", &rec));
  size_t at = rec.find("\"ready\"");
  ASSERT_NE(at, std::string::npos) << rec;
  rec.replace(at, 7, "\"deleting\"");
  ASSERT_TRUE(WriteFile(state_dir_ + "/volumes/doomed.json", rec));
  fs::create_directories(pool_dir_ + "/doomed/sub");
  ASSERT_TRUE(WriteFile(pool_dir_ + "/doomed/sub/f", "x"));
  fs::rename(pool_dir_ + "/doomed", pool_dir_ + "/.deleting-doomed");

  // Read-only publish: bound, not yet remounted read-only, record publishing.
  std::string pub_dir = state_dir_ + "/publications";
  std::string pub_file;
  for (const auto& e : fs::directory_iterator(pub_dir)) pub_file = e.path().string();
  ASSERT_TRUE(ReadFile(pub_file, &rec));
  at = rec.find("\"published\"");
  ASSERT_NE(at, std::string::npos) << rec;
  rec.replace(at, 11, "\"publishing\"");
  ASSERT_TRUE(WriteFile(pub_file, rec));
  ASSERT_EQ(RunCommand({"/bin/mount", "-o", "remount,bind,rw", t}, nullptr, nullptr), 0);
  struct statvfs sv;
  ASSERT_EQ(::statvfs(t.c_str(), &sv), 0);
  ASSERT_FALSE(sv.f_flag & ST_RDONLY);

  StartDaemon();
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_EQ(Listed(stub()), (std::set<std::string>{"shared"}));
  EXPECT_FALSE(Exists(pool_dir_ + "/.deleting-doomed"));
  EXPECT_FALSE(Exists(pool_dir_ + "/doomed"));
  EXPECT_FALSE(IsMountPoint(t)) << "a publish that never returned OK left its (writable) bind";
  EXPECT_EQ(MountsBelow(pods_root_), 0);
  EXPECT_FALSE(Exists(pub_file));
  bool reported = false;
  for (const std::string& d : Drift(stub())) reported |= d.find("unmounted and rolled back") != std::string::npos;
  EXPECT_TRUE(reported) << Join(Drift(stub()));
  // kubelet's retry publishes it afresh.
  EXPECT_TRUE(Publish("shared", t, /*read_only=*/true).ok());
  ASSERT_EQ(::statvfs(t.c_str(), &sv), 0);
  EXPECT_TRUE(sv.f_flag & ST_RDONLY);
  EXPECT_TRUE(Unpublish(t).ok());
  EXPECT_EQ(MountsBelow(pods_root_), 0);
}

// A published bind whose mount options were lost while nodevold was away
// (a remount by hand): Start() applies the options recorded.
TEST_F(CrashRecovery, PublishedBindGetsItsMountOptionsBackOnStart) {
  StartDaemon();
  ASSERT_TRUE(CreateVolume("v1", kSize).ok());
  std::string t = MakeTarget("pod-1", "data");
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    v1::PublishRequest req;
    req.set_volume("v1");
    req.set_target(t);
    for (const char* o : {"nosuid", "nodev", "noexec"}) req.add_mount_options(o);
    v1::PublishResponse resp;
    ASSERT_TRUE(stub()->Publish(&ctx, req, &resp).ok());
  }
  constexpr unsigned long kHard = ST_NOSUID | ST_NODEV | ST_NOEXEC;
  struct statvfs sv;
  ASSERT_EQ(::statvfs(t.c_str(), &sv), 0);
  ASSERT_EQ(sv.f_flag & kHard, kHard) << "Publish itself did not apply the options";
  KillDaemon();
  ASSERT_EQ(RunCommand({"/bin/mount", "-o", "remount,bind,suid,dev,exec", t}, nullptr, nullptr), 0);
  ASSERT_EQ(::statvfs(t.c_str(), &sv), 0);
  ASSERT_EQ(sv.f_flag & kHard, 0u);

  StartDaemon();
  ASSERT_FALSE(HasFatalFailure());
  EXPECT_TRUE(IsMountPoint(t));
  ASSERT_EQ(::statvfs(t.c_str(), &sv), 0);
  EXPECT_EQ(sv.f_flag & kHard, kHard)
      << "publication restored by reconcile lacks nosuid,nodev,noexec (statvfs flags 0x" << std::hex << sv.f_flag
      << ")";
  EXPECT_TRUE(Unpublish(t).ok());
}

}  // namespace
}  // namespace nodevol::testing
