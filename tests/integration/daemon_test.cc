// The daemon as a process: its socket, its state-dir lock, signals,
// configuration errors, the WatchCapacity stream and the /metrics endpoint.
#include <algorithm>
#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "daemon_fixture.h"

extern char** environ;

namespace nodevol::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Whether pid has exited within timeout; does not reap it.
bool ExitsWithin(pid_t pid, Clock::duration timeout) {
  auto until = Clock::now() + timeout;
  for (;;) {
    siginfo_t info{};
    if (::waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) return true;
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(milliseconds(20));
  }
}

// A TCP port nobody listens on right now.
int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return -1;
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

// GET path over a plain socket (HTTP/1.1, Connection: close); the whole
// response, headers included ("" when the connection fails).
std::string HttpGet(int port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return "";
  }
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string resp;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) resp.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return resp;
}

class DaemonTest : public DaemonFixture {
 protected:
  // The flags the fixture starts nodevold with, for running it by hand.
  std::vector<std::string> Flags() { return DaemonFlags(); }

  // Flags() with the flag starting with `prefix` replaced (or removed when
  // replacement is empty).
  std::vector<std::string> FlagsWith(const std::string& prefix, const std::string& replacement) {
    std::vector<std::string> out;
    for (const std::string& f : Flags()) {
      if (f.rfind(prefix, 0) == 0) {
        if (!replacement.empty()) out.push_back(replacement);
      } else {
        out.push_back(f);
      }
    }
    return out;
  }

  // Runs nodevold to completion (killed after 10 s: exit 124).
  int RunDaemon(const std::vector<std::string>& flags, std::string* out, std::string* err) {
    std::vector<std::string> argv = {"/usr/bin/timeout", "10", NODEVOLD_PATH};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return RunCommand(argv, out, err);
  }

  std::unique_ptr<grpc::ClientReader<v1::GetCapacityResponse>> Watch(grpc::ClientContext* ctx, uint32_t heartbeat) {
    ctx->set_deadline(std::chrono::system_clock::now() + seconds(30));
    v1::WatchCapacityRequest req;
    req.set_heartbeat_seconds(heartbeat);
    return stub()->WatchCapacity(ctx, req);
  }

  static const v1::PoolCapacity* Pool(const v1::GetCapacityResponse& m, const std::string& name) {
    for (const auto& p : m.pools())
      if (p.pool() == name) return &p;
    return nullptr;
  }
};

TEST_F(DaemonTest, SocketIsRootOnly) {
  StartDaemon();
  struct stat st;
  ASSERT_EQ(::lstat(socket_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u) << std::oct << (st.st_mode & 07777);
  EXPECT_EQ(st.st_uid, 0u);
}

TEST_F(DaemonTest, SecondDaemonOnTheSameStateDirRefusesToStart) {
  StartDaemon();
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  std::string out, err;
  int rc = RunDaemon(Flags(), &out, &err);
  EXPECT_NE(rc, 0) << err;
  EXPECT_NE(rc, 124) << "the second nodevold kept running";
  EXPECT_TRUE(Contains(err, "lock")) << err;

  // The first one still serves, on a fresh connection too.
  EXPECT_TRUE(DaemonRunning());
  EXPECT_TRUE(fs::exists(socket_)) << "the second daemon removed the first one's socket";
  auto fresh = NewStub();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + seconds(5));
  v1::GetVolumeRequest req;
  req.set_name("v1");
  v1::GetVolumeResponse resp;
  grpc::Status st = fresh->GetVolume(&ctx, req, &resp);
  EXPECT_TRUE(st.ok()) << st.error_message();

  // Once the first stops, the lock is free again.
  EXPECT_EQ(StopDaemon(), 0);
  StartDaemon();
  EXPECT_TRUE(CreateVolume("v1", 1 << 20).ok());
}

TEST_F(DaemonTest, SigtermStopsCleanlyAndRemovesTheSocket) {
  StartDaemon();
  ASSERT_TRUE(CreateVolume("v1", 1 << 20).ok());
  pid_t pid = daemon_pid();
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  ASSERT_TRUE(ExitsWithin(pid, seconds(10))) << "nodevold did not stop within 10 s of SIGTERM";
  EXPECT_EQ(StopDaemon(), 0);
  EXPECT_FALSE(fs::exists(socket_));
}

TEST_F(DaemonTest, SigtermWithAnOpenWatchStreamStillStops) {
  StartDaemon();
  grpc::ClientContext ctx;
  auto reader = Watch(&ctx, 60);
  v1::GetCapacityResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  pid_t pid = daemon_pid();
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  EXPECT_TRUE(ExitsWithin(pid, seconds(10))) << "an open WatchCapacity stream blocked the stop";
  EXPECT_EQ(StopDaemon(), 0);
  EXPECT_FALSE(fs::exists(socket_));
  ctx.TryCancel();
  reader->Finish();
}

TEST_F(DaemonTest, ConfigurationErrorsNameTheOption) {
  struct Case {
    std::string what;
    std::vector<std::string> flags;
    std::string mention;
  };
  std::string missing_path = root_ + "/no-such-pool-dir";
  auto Plus = [&](const std::string& flag) {
    std::vector<std::string> f = Flags();
    f.push_back(flag);
    return f;
  };
  std::vector<Case> cases = {
      {"bad log level", FlagsWith("--log-level", "--log-level=loud"), "--log-level"},
      {"bad log target", FlagsWith("--log-target", "--log-target=syslog"), "--log-target"},
      {"no pool", FlagsWith("--pool", ""), "--pool"},
      {"pool without backend", FlagsWith("--pool", "--pool=name=default,path=" + pool_dir_), "--pool"},
      {"pool item not key=value", FlagsWith("--pool", "--pool=name=default,backend=dir," + pool_dir_), "--pool"},
      {"bad pool name", FlagsWith("--pool", "--pool=name=Default!,backend=dir,path=" + pool_dir_), "pool"},
      {"pool path missing", FlagsWith("--pool", "--pool=name=default,backend=dir,path=" + missing_path), missing_path},
      {"unknown dir option", FlagsWith("--pool", "--pool=name=default,backend=dir,path=" + pool_dir_ + ",colour=red"),
       "colour"},
      {"unknown backend", FlagsWith("--pool", "--pool=name=default,backend=zfs,path=" + pool_dir_), "zfs"},
      {"relative socket", FlagsWith("--socket", "--socket=nodevold.sock"), "--socket"},
      {"relative state dir", FlagsWith("--state-dir", "--state-dir=state"), "--state-dir"},
      {"heartbeat 0", Plus("--heartbeat-seconds=0"), "--heartbeat-seconds"},
      {"capacity poll too fast", Plus("--capacity-poll-ms=10"), "--capacity-poll-ms"},
      {"metrics twice", Plus("--metrics-address=127.0.0.1:1"), "--metrics-address"},
      {"bad metrics address", FlagsWith("--metrics-address", "--metrics-address=localhost"), "--metrics-address"},
      {"unknown flag", FlagsWith("--log-level", "--frobnicate=1"), "frobnicate"},
      {"missing config file", FlagsWith("--config", "--config=" + root_ + "/missing.conf"), "--config"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::string out, err;
    int rc = RunDaemon(c.flags, &out, &err);
    EXPECT_TRUE(rc == 1 || rc == 2) << c.what << ": exit " << rc << "\n" << err;
    EXPECT_TRUE(Contains(err, c.mention)) << c.what << ": stderr does not mention " << c.mention << ":\n" << err;
    EXPECT_FALSE(fs::exists(socket_)) << c.what << ": a socket was left behind";
  }
  // Plain syntax errors are "bad configuration" (2), not start failures.
  std::string out, err;
  EXPECT_EQ(RunDaemon(FlagsWith("--log-level", "--log-level=loud"), &out, &err), 2);
  EXPECT_EQ(RunDaemon(FlagsWith("--pool", ""), &out, &err), 2);
  EXPECT_EQ(RunDaemon(FlagsWith("--pool", "--pool=name=default"), &out, &err), 2);
  EXPECT_FALSE(fs::exists(missing_path)) << "a missing pool directory must not be created";
}

TEST_F(DaemonTest, HelpListsEveryOption) {
  std::string out, err;
  ASSERT_EQ(RunDaemon({"--help"}, &out, &err), 0) << err;
  for (const char* opt : {"--help", "--version", "--config", "--node-name", "--socket", "--state-dir", "--pods-root",
                          "--pool", "--metrics-address", "--log-level", "--log-target", "--heartbeat-seconds",
                          "--capacity-poll-ms", "--shutdown-grace-seconds"}) {
    EXPECT_TRUE(Contains(out, opt)) << opt << " missing from --help:\n" << out;
  }
  ASSERT_EQ(RunDaemon({"--version"}, &out, &err), 0) << err;
  EXPECT_TRUE(Contains(out, "nodevold ")) << out;
}

TEST_F(DaemonTest, WatchCapacitySendsAtOnceAndOnChange) {
  StartDaemon();
  grpc::ClientContext ctx;
  auto start = Clock::now();
  auto reader = Watch(&ctx, 60);
  v1::GetCapacityResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  EXPECT_LT(Clock::now() - start, seconds(2)) << "the first message must come at once";
  EXPECT_FALSE(msg.heartbeat());
  const v1::PoolCapacity* p = Pool(msg, "default");
  ASSERT_NE(p, nullptr);
  EXPECT_GT(p->total_bytes(), 0u);
  EXPECT_EQ(p->volume_count(), 0u);
  EXPECT_EQ(p->allocated_bytes(), 0u);
  auto now_ms = std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_NEAR(static_cast<double>(msg.observed_unix_ms()), static_cast<double>(now_ms), 10000);

  auto created = Clock::now();
  ASSERT_TRUE(CreateVolume("w1", 3 << 20).ok());
  // Free space of the shared disk may move meanwhile: skip such messages.
  for (;;) {
    ASSERT_TRUE(reader->Read(&msg)) << "stream ended before the change was sent";
    p = Pool(msg, "default");
    ASSERT_NE(p, nullptr);
    if (p->volume_count() == 1) break;
    EXPECT_FALSE(msg.heartbeat()) << "heartbeat with a 60 s interval";
  }
  EXPECT_LT(Clock::now() - created, seconds(2)) << "the change must be sent without waiting for a poll";
  EXPECT_FALSE(msg.heartbeat());
  EXPECT_EQ(p->allocated_bytes(), 3u << 20);
  ctx.TryCancel();
  reader->Finish();
}

// A pool's allocated bytes and counts are kept as records change (not
// summed per sample): after creates, an expand, a delete, a failed create,
// a snapshot and its deletion, and a restart, they must equal what
// ListVolumes and ListSnapshots show.
TEST_F(DaemonTest, PoolUsageFollowsEveryChangeAndARestart) {
  StartDaemon();
  auto call = [&](auto method, const auto& req, auto* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(30));
    return (stub()->*method)(&ctx, req, resp);
  };
  auto expect_usage = [&](const std::string& when) {
    v1::GetCapacityRequest creq;
    creq.set_pool("default");
    v1::GetCapacityResponse cap;
    ASSERT_TRUE(call(&v1::Node::Stub::GetCapacity, creq, &cap).ok()) << when;
    const v1::PoolCapacity* p = Pool(cap, "default");
    ASSERT_NE(p, nullptr) << when;
    v1::ListVolumesResponse vols;
    ASSERT_TRUE(call(&v1::Node::Stub::ListVolumes, v1::ListVolumesRequest(), &vols).ok()) << when;
    uint64_t bytes = 0;
    for (const auto& v : vols.volumes()) bytes += v.size_bytes();
    v1::ListSnapshotsResponse snaps;
    ASSERT_TRUE(call(&v1::Node::Stub::ListSnapshots, v1::ListSnapshotsRequest(), &snaps).ok()) << when;
    EXPECT_EQ(p->allocated_bytes(), bytes) << when;
    EXPECT_EQ(p->volume_count(), static_cast<uint64_t>(vols.volumes_size())) << when;
    EXPECT_EQ(p->snapshot_count(), static_cast<uint64_t>(snaps.snapshots_size())) << when;
  };
  expect_usage("empty");
  ASSERT_TRUE(CreateVolume("u1", 1 << 20).ok());
  ASSERT_TRUE(CreateVolume("u2", 2 << 20).ok());
  ASSERT_TRUE(CreateVolume("u3", 3 << 20).ok());
  ASSERT_TRUE(CreateVolume("u3", 3 << 20).ok()) << "idempotent";
  expect_usage("after three creates");
  ASSERT_FALSE(CreateVolume("u4", uint64_t{1} << 61).ok()) << "larger than the disk";
  expect_usage("after a refused create");
  v1::ExpandVolumeRequest ereq;
  ereq.set_name("u2");
  ereq.set_size_bytes(5 << 20);
  v1::ExpandVolumeResponse eresp;
  ASSERT_TRUE(call(&v1::Node::Stub::ExpandVolume, ereq, &eresp).ok());
  expect_usage("after an expand");
  v1::CreateSnapshotRequest sreq;
  sreq.set_name("s1");
  sreq.set_source_volume("u1");
  v1::CreateSnapshotResponse sresp;
  ASSERT_TRUE(call(&v1::Node::Stub::CreateSnapshot, sreq, &sresp).ok());
  v1::DeleteVolumeRequest dreq;
  dreq.set_name("u3");
  v1::DeleteVolumeResponse dresp;
  ASSERT_TRUE(call(&v1::Node::Stub::DeleteVolume, dreq, &dresp).ok());
  expect_usage("after a snapshot and a delete");
  ASSERT_EQ(StopDaemon(), 0);
  StartDaemon();
  expect_usage("after a restart");
  v1::DeleteSnapshotRequest dsreq;
  dsreq.set_name("s1");
  v1::DeleteSnapshotResponse dsresp;
  ASSERT_TRUE(call(&v1::Node::Stub::DeleteSnapshot, dsreq, &dsresp).ok());
  expect_usage("after deleting the snapshot");
}

// ListVolumes in pages: name order, each volume once, the last page
// without a token; a token whose volume went meanwhile still continues
// after it; a token nodevold did not give is refused.
TEST_F(DaemonTest, ListVolumesPagesInNameOrder) {
  StartDaemon();
  std::vector<std::string> names = {"p-g", "p-a", "p-e", "p-c", "p-b", "p-f", "p-d"};
  for (const std::string& n : names) ASSERT_TRUE(CreateVolume(n, 1 << 20).ok()) << n;
  std::sort(names.begin(), names.end());
  auto list = [&](uint32_t max, const std::string& token, v1::ListVolumesResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(30));
    v1::ListVolumesRequest req;
    req.set_max_entries(max);
    req.set_starting_token(token);
    return stub()->ListVolumes(&ctx, req, resp);
  };
  std::vector<std::string> seen;
  std::vector<int> sizes;
  std::string token;
  do {
    v1::ListVolumesResponse page;
    ASSERT_TRUE(list(3, token, &page).ok());
    sizes.push_back(page.volumes_size());
    for (const auto& v : page.volumes()) seen.push_back(v.name());
    token = page.next_token();
    if (sizes.size() == 1) {
      // The volume the token names goes before the next page is asked.
      v1::DeleteVolumeRequest del;
      del.set_name(seen.back());
      v1::DeleteVolumeResponse dresp;
      grpc::ClientContext ctx;
      ASSERT_TRUE(stub()->DeleteVolume(&ctx, del, &dresp).ok());
    }
  } while (!token.empty() && sizes.size() < 10);
  EXPECT_EQ(seen, names);
  EXPECT_EQ(sizes, (std::vector<int>{3, 3, 1}));

  v1::ListVolumesResponse all;
  ASSERT_TRUE(list(0, "", &all).ok());
  EXPECT_EQ(all.volumes_size(), 6) << "max_entries 0: every volume at once";
  EXPECT_TRUE(all.next_token().empty());
  v1::ListVolumesResponse bad;
  grpc::Status st = list(3, "p-c", &bad);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("starting_token"), std::string::npos) << st.error_message();
}

// The provisioner stops counting a new volume as promised once the node
// reports the sample its CreateVolume answer named: every message of that
// sample or later must have the volume, however creates and samples race.
TEST_F(DaemonTest, CreateVolumeNamesTheFirstCapacitySampleWithTheVolume) {
  StartDaemon();
  grpc::ClientContext ctx;
  auto reader = Watch(&ctx, 60);
  v1::GetCapacityResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  EXPECT_GE(msg.sample(), 1u);
  uint64_t last = 0;
  for (uint32_t i = 1; i <= 6; ++i) {
    grpc::ClientContext cctx;
    cctx.set_deadline(std::chrono::system_clock::now() + seconds(10));
    v1::CreateVolumeRequest req;
    req.set_name("s" + std::to_string(i));
    req.set_pool("default");
    req.set_size_bytes(1 << 20);
    v1::CreateVolumeResponse resp;
    ASSERT_TRUE(stub()->CreateVolume(&cctx, req, &resp).ok());
    ASSERT_GT(resp.capacity_sample(), last) << "create " << i;
    last = resp.capacity_sample();
    // Creates back to back, without waiting, on odd turns: the samples
    // they poke overlap the next create.
    if (i % 2) continue;
    for (;;) {
      ASSERT_TRUE(reader->Read(&msg)) << "stream ended before sample " << last;
      const v1::PoolCapacity* p = Pool(msg, "default");
      ASSERT_NE(p, nullptr);
      if (msg.sample() >= last) {
        EXPECT_EQ(p->volume_count(), i) << "sample " << msg.sample() << " (create " << i << " named " << last << ")";
        break;
      }
    }
  }
  ctx.TryCancel();
  reader->Finish();
}

TEST_F(DaemonTest, WatchCapacityHeartbeats) {
  StartDaemon();
  ASSERT_TRUE(CreateVolume("w1", 1 << 20).ok());
  grpc::ClientContext ctx;
  auto reader = Watch(&ctx, 1);
  v1::GetCapacityResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  // Nothing changes, so only heartbeats keep the stream going: four
  // messages within the stream's 30 s deadline (Watch) are heartbeats at a
  // 1 s interval, whatever the load; a gap measured here would flake.
  int heartbeats = 0;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(reader->Read(&msg)) << "message " << i << ": the stream ended or its 30 s deadline passed";
    if (msg.heartbeat()) {
      ++heartbeats;
      const v1::PoolCapacity* p = Pool(msg, "default");
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(p->volume_count(), 1u);
      EXPECT_EQ(p->allocated_bytes(), 1u << 20);
    }
  }
  EXPECT_GE(heartbeats, 2);
  ctx.TryCancel();
  reader->Finish();
}

TEST_F(DaemonTest, WatchCapacityUsesTheConfiguredDefaultHeartbeat) {
  StartDaemon({"--heartbeat-seconds=1"});
  grpc::ClientContext ctx;
  auto reader = Watch(&ctx, 0);
  v1::GetCapacityResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  auto start = Clock::now();
  bool heartbeat = false;
  while (!heartbeat && Clock::now() - start < seconds(5)) {
    ASSERT_TRUE(reader->Read(&msg));
    heartbeat = msg.heartbeat();
  }
  EXPECT_TRUE(heartbeat);
  EXPECT_LT(Clock::now() - start, milliseconds(2500));
  ctx.TryCancel();
  reader->Finish();
}

// The fixture starts nodevold with --metrics-address=off, and the flag may
// not be given twice, so this test runs its own nodevold in the sandbox.
class MetricsTest : public DaemonTest {
 protected:
  void TearDown() override {
    if (own_pid_ > 0) {
      ::kill(own_pid_, SIGTERM);
      if (!ExitsWithin(own_pid_, seconds(10))) ::kill(own_pid_, SIGKILL);
      ::waitpid(own_pid_, nullptr, 0);
    }
    DaemonTest::TearDown();
  }

  void Spawn(const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {NODEVOLD_PATH};
    argv.insert(argv.end(), flags.begin(), flags.end());
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    ASSERT_EQ(posix_spawn(&own_pid_, args[0], &fa, nullptr, args.data(), environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    own_stub_ = NewStub();
    auto until = Clock::now() + seconds(10);
    while (Clock::now() < until) {
      ASSERT_FALSE(ExitsWithin(own_pid_, milliseconds(1))) << "nodevold exited:\n" << ReadAll(log_path_);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + seconds(1));
      ctx.set_wait_for_ready(true);
      v1::GetInfoResponse resp;
      if (own_stub_->GetInfo(&ctx, v1::GetInfoRequest(), &resp).ok()) return;
    }
    FAIL() << "nodevold did not answer:\n" << ReadAll(log_path_);
  }

  pid_t own_pid_ = -1;
  std::unique_ptr<v1::Node::Stub> own_stub_;
};

TEST_F(MetricsTest, MetricsEndpointCountsRpcsAndShowsPools) {
  int port = FreePort();
  ASSERT_GT(port, 0);
  Spawn(FlagsWith("--metrics-address", "--metrics-address=127.0.0.1:" + std::to_string(port)));

  for (const char* name : {"m1", "m2"}) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(10));
    v1::CreateVolumeRequest req;
    req.set_name(name);
    req.set_pool("default");
    req.set_size_bytes(1 << 20);
    v1::CreateVolumeResponse resp;
    ASSERT_TRUE(own_stub_->CreateVolume(&ctx, req, &resp).ok());
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(10));
    v1::GetVolumeRequest req;
    req.set_name("missing");
    v1::GetVolumeResponse resp;
    ASSERT_EQ(own_stub_->GetVolume(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }

  // Pool gauges follow the capacity sampler: allow it a moment.
  std::string body;
  auto until = Clock::now() + seconds(5);
  do {
    body = HttpGet(port, "/metrics");
    if (Contains(body, "nodevol_pool_volumes{pool=\"default\",backend=\"dir\"} 2\n")) break;
    std::this_thread::sleep_for(milliseconds(100));
  } while (Clock::now() < until);

  EXPECT_EQ(body.rfind("HTTP/1.1 200", 0), 0u) << body.substr(0, 200);
  EXPECT_TRUE(Contains(body, "\nnodevol_rpc_total{method=\"CreateVolume\",code=\"OK\"} 2\n")) << body;
  EXPECT_TRUE(Contains(body, "\nnodevol_rpc_total{method=\"GetVolume\",code=\"NOT_FOUND\"} 1\n")) << body;
  EXPECT_TRUE(Contains(body, "\nnodevol_rpc_errors_total{method=\"GetVolume\"} 1\n")) << body;
  EXPECT_TRUE(Contains(body, "\nnodevol_rpc_errors_total{method=\"CreateVolume\"} 0\n")) << body;
  EXPECT_TRUE(Contains(body, "nodevol_rpc_duration_seconds_count{method=\"CreateVolume\"} 2\n")) << body;
  EXPECT_TRUE(Contains(body, "\nnodevol_pool_total_bytes{pool=\"default\",backend=\"dir\"} ")) << body;
  EXPECT_FALSE(Contains(body, "\nnodevol_pool_total_bytes{pool=\"default\",backend=\"dir\"} 0\n")) << body;
  EXPECT_TRUE(Contains(body, "\nnodevol_pool_allocated_bytes{pool=\"default\",backend=\"dir\"} 2097152\n")) << body;
  EXPECT_TRUE(Contains(body, "\nnodevol_pool_volumes{pool=\"default\",backend=\"dir\"} 2\n")) << body;

  EXPECT_EQ(HttpGet(port, "/nothing-here").rfind("HTTP/1.1 404", 0), 0u);
}

TEST_F(MetricsTest, PortInUseIsAStartFailureNamingTheOption) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  std::string out, err;
  int rc = RunDaemon(FlagsWith("--metrics-address", "--metrics-address=127.0.0.1:" +
                                                        std::to_string(ntohs(addr.sin_port))),
                     &out, &err);
  ::close(fd);
  EXPECT_EQ(rc, 1) << err;
  EXPECT_TRUE(Contains(err, "--metrics-address")) << err;
  EXPECT_FALSE(fs::exists(socket_));
}

}  // namespace
}  // namespace nodevol::testing
