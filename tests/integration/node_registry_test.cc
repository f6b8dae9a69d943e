// The provisioner's NodeRegistry and NodeClient (provisioner/nodes) against
// two real nodevolds over mutual TLS, each with a 64 MiB tmpfs dir pool:
// the registry sees both pools, follows a volume being created and filled,
// marks a killed nodevold unreachable and picks it up again after restart,
// and refuses a nodevold whose certificate names another node.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "daemon_fixture.h"
#include "nodes/node_registry.h"
#include "nodes/tls.h"
#include "test_certs.h"

extern char** environ;

namespace nodevol::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nodes::NodeRegistry;
using nodes::NodeState;

constexpr uint64_t kPoolBytes = 64ull << 20;

// A free TCP port on 127.0.0.1 (bound and released; nodevold binds it next).
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(a.sin_port);
}

template <typename Pred>
bool WaitFor(Pred pred, std::chrono::seconds limit = 30s) {
  for (auto until = std::chrono::steady_clock::now() + limit; std::chrono::steady_clock::now() < until;) {
    if (pred()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return pred();
}

// One pretend node: its own sandbox, tmpfs pool, certificate and port.
struct Nodevold {
  std::string name, dir, pool, log;
  int port = 0;
  pid_t pid = -1;
  std::vector<std::string> argv;

  std::string address() const { return "127.0.0.1:" + std::to_string(port); }

  bool Start() {
    pid_t p = -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    int rc = posix_spawn(&p, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return false;
    pid = p;
    // Ready once this run's listener line is in the log.
    size_t before = starts++;
    return WaitFor([&] {
      std::string text = ReadAll(log);
      size_t n = 0;
      for (size_t at = 0; (at = text.find("mutual TLS listener on", at)) != std::string::npos; ++at) ++n;
      return n > before;
    });
  }
  void Kill() {
    if (pid <= 0) return;
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pid = -1;
  }
  void Stop() {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    waitpid(pid, nullptr, 0);
    pid = -1;
  }
  size_t starts = 0;
};

class NodeRegistryTest : public DaemonFixture {
 protected:
  void SetUp() override {
    DaemonFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    std::string certs = root_ + "/certs";
    fs::create_directories(certs);
    ca_ = MakeCa(certs, "nodevol");
    client_ = MakeCert(ca_, certs, "nodevol-provisioner", {}, CertUse::kClient);
    for (const char* name : {"node-a", "node-b"}) {
      Nodevold n;
      n.name = name;
      n.dir = root_ + "/" + name;
      n.pool = n.dir + "/pool";
      n.log = n.dir + "/nodevold.log";
      fs::create_directories(n.pool);
      fs::create_directories(n.dir + "/pods");
      ASSERT_EQ(mount("tmpfs", n.pool.c_str(), "tmpfs", 0, "size=64m,mode=0755"), 0) << strerror(errno);
      // node-a's certificate also carries its address, as one signed for
      // a Node's InternalIP would.
      std::vector<std::string> sans = {std::string("DNS:") + name};
      if (n.name == "node-a") sans.push_back("IP:127.0.0.1");
      TestCert cert = MakeCert(ca_, certs, name, sans, CertUse::kServer);
      n.port = FreePort();
      ASSERT_NE(n.port, 0);
      std::ofstream(n.dir + "/nodevold.conf").close();
      n.argv = {NODEVOLD_PATH, "--config=" + n.dir + "/nodevold.conf", "--socket=" + n.dir + "/nodevold.sock",
                "--state-dir=" + n.dir + "/state", "--pods-root=" + n.dir + "/pods",
                "--pool=name=default,backend=dir,path=" + n.pool, "--metrics-address=off", "--log-target=stderr",
                "--node-name=" + n.name, "--capacity-poll-ms=100", "--tls-listen=" + n.address(),
                "--tls-ca=" + ca_.cert, "--tls-cert=" + cert.cert, "--tls-key=" + cert.key};
      // node-b keeps its CSI front door off: GetInfo says so.
      if (n.name == "node-b") n.argv.push_back("--csi=off");
      nodes_.push_back(n);
    }
    for (Nodevold& n : nodes_) ASSERT_TRUE(n.Start()) << n.name << " did not start:\n" << ReadAll(n.log);
  }

  void TearDown() override {
    if (registry_) registry_->Stop();
    for (Nodevold& n : nodes_) {
      n.Stop();
      if (HasFailure()) std::cerr << "---- " << n.name << " log ----\n" << ReadAll(n.log);
    }
    DaemonFixture::TearDown();  // unmounts the tmpfs pools
  }

  std::unique_ptr<NodeRegistry> MakeRegistry(const nodes::TlsChannelFactory& tls,
                                             std::chrono::milliseconds connect_timeout = 10s) {
    NodeRegistry::Options o;
    o.connect_timeout = connect_timeout;
    o.dial = [&tls](const nodes::NodeEndpoint& e) { return tls.Dial(e.address, e.name); };
    o.on_change = [this](const std::string&) { ++changes_; };
    o.heartbeat_seconds = 1;
    return std::make_unique<NodeRegistry>(o);
  }

  NodeState State(const std::string& node) {
    NodeState s;
    EXPECT_TRUE(registry_->Get(node, &s)) << node;
    return s;
  }

  nodes::TlsClientFiles ClientFiles() const { return {ca_.cert, client_.cert, client_.key, 1}; }

  TestCa ca_;
  TestCert client_;
  std::vector<Nodevold> nodes_;
  std::unique_ptr<NodeRegistry> registry_;
  std::atomic<int> changes_{0};
};

TEST_F(NodeRegistryTest, FollowsCapacityAndReachabilityOfRealNodevolds) {
  ASSERT_TRUE(nodes::CheckTlsClientFiles(ClientFiles()).ok());
  nodes::TlsChannelFactory tls(ClientFiles());
  registry_ = MakeRegistry(tls);
  registry_->SetNodes({{"node-a", nodes_[0].address()}, {"node-b", nodes_[1].address()}});
  ASSERT_TRUE(WaitFor([&] { return State("node-a").reachable && State("node-b").reachable; }))
      << State("node-a").last_error << " / " << State("node-b").last_error;

  EXPECT_EQ(registry_->CsiDriver("node-a"), "nodevol.io");
  EXPECT_EQ(registry_->CsiDriver("node-b"), "") << "nodevold --csi=off serves no CSI driver";
  EXPECT_EQ(registry_->CsiDriver("node-z"), "");
  for (const NodeState& s : registry_->Snapshot()) {
    ASSERT_EQ(s.pools.size(), 1u) << s.name;
    EXPECT_EQ(s.pools[0].name, "default");
    EXPECT_EQ(s.pools[0].backend, "dir");
    EXPECT_EQ(s.pools[0].total_bytes, kPoolBytes) << "the tmpfs pool's size";
    EXPECT_GT(s.pools[0].free_bytes, kPoolBytes - (1 << 20));
    EXPECT_EQ(s.pools[0].volume_count, 0u);
  }
  const uint64_t free_before = State("node-a").pools[0].free_bytes;
  const uint64_t free_b = State("node-b").pools[0].free_bytes;

  // Create a volume on node-a through the registry's client.
  std::shared_ptr<nodes::NodeClient> a = registry_->Client("node-a");
  ASSERT_NE(a, nullptr);
  v1::CreateVolumeRequest req;
  req.set_name("pvc-reg");
  req.set_pool("default");
  req.set_size_bytes(16 << 20);
  v1::CreateVolumeResponse created;
  Status st = a->CreateVolume(req, &created);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_TRUE(WaitFor([&] { return State("node-a").pools[0].volume_count == 1; }));
  EXPECT_EQ(State("node-a").pools[0].allocated_bytes, 16u << 20);
  // A dir pool without quotas shares its filesystem's free space: only
  // data written lowers it. Write 8 MiB as a pod would.
  {
    std::ofstream f(nodes_[0].pool + "/pvc-reg/data", std::ios::binary);
    std::string mib(1 << 20, 'x');
    for (int i = 0; i < 8; ++i) f << mib;
  }
  ASSERT_TRUE(WaitFor([&] { return State("node-a").pools[0].free_bytes <= free_before - (8 << 20); }))
      << State("node-a").pools[0].free_bytes;
  EXPECT_EQ(State("node-b").pools[0].free_bytes, free_b);
  EXPECT_EQ(State("node-b").pools[0].volume_count, 0u);
  v1::ListVolumesResponse list;
  ASSERT_TRUE(registry_->Client("node-b")->ListVolumes(v1::ListVolumesRequest(), &list).ok());
  EXPECT_EQ(list.volumes_size(), 0);

  // A refused call comes back as the node's Status.
  req.set_size_bytes(1ull << 40);
  req.set_name("pvc-too-big");
  st = a->CreateVolume(req, &created);
  EXPECT_EQ(st.code(), Status::Code::kResourceExhausted) << st.ToString();
  EXPECT_EQ(st.message().rfind("node node-a: CreateVolume: ", 0), 0u) << st.message();

  // Kill node-a: unreachable, node-b unaffected, calls fail fast.
  int before = changes_;
  nodes_[0].Kill();
  ASSERT_TRUE(WaitFor([&] { return !State("node-a").reachable; }));
  NodeState down = State("node-a");
  EXPECT_FALSE(down.last_error.empty());
  EXPECT_EQ(down.pools.size(), 1u) << "last figures kept";
  EXPECT_TRUE(State("node-b").reachable);
  EXPECT_GT(changes_, before);
  v1::GetInfoResponse info;
  EXPECT_EQ(a->GetInfo(&info).code(), Status::Code::kUnavailable);

  // Restart it on the same port and state: back, with its volume.
  ASSERT_TRUE(nodes_[0].Start()) << ReadAll(nodes_[0].log);
  ASSERT_TRUE(WaitFor([&] { return State("node-a").reachable; })) << State("node-a").last_error;
  EXPECT_GT(State("node-a").since, down.since);
  EXPECT_EQ(State("node-a").pools[0].volume_count, 1u);
  ASSERT_TRUE(a->GetInfo(&info).ok());
  EXPECT_EQ(info.node_name(), "node-a");

  // Removing a node drops it; the other stays.
  registry_->SetNodes({{"node-b", nodes_[1].address()}});
  EXPECT_EQ(registry_->Snapshot().size(), 1u);
  EXPECT_EQ(registry_->Client("node-a"), nullptr);
}

TEST_F(NodeRegistryTest, NodevoldWhoseCertificateNamesAnotherNodeIsUnreachable) {
  nodes::TlsChannelFactory tls(ClientFiles());
  registry_ = MakeRegistry(tls, 2s);
  // node-a's name at node-b's address: node-b's certificate says node-b.
  registry_->SetNodes({{"node-a", nodes_[1].address()}, {"node-b", nodes_[1].address()}});
  ASSERT_TRUE(WaitFor([&] { return State("node-b").reachable && !State("node-a").last_error.empty(); }));
  NodeState s = State("node-a");
  EXPECT_FALSE(s.reachable);
  EXPECT_TRUE(s.pools.empty());
  EXPECT_NE(s.last_error.find("Hostname Verification Check failed"), std::string::npos)
      << "gRPC's reason, not a bare deadline: " << s.last_error;
}

// A node named like an address would be verified against the
// certificate's IP addresses, which nodes choose (their status.addresses):
// "127.0.0.5" listing 127.0.0.6 passed as node "127.0.0.6" (issue 57, item
// 6). Such a node is never dialled, and says why.
TEST_F(NodeRegistryTest, ANodeNamedLikeAnAddressIsNotDialled) {
  nodes::TlsChannelFactory tls(ClientFiles());
  registry_ = MakeRegistry(tls, 2s);
  registry_->SetNodes({{"127.0.0.1", nodes_[0].address()}, {"node-b", nodes_[1].address()}});
  ASSERT_TRUE(WaitFor([&] { return State("node-b").reachable && !State("127.0.0.1").last_error.empty(); }));
  NodeState s = State("127.0.0.1");
  EXPECT_FALSE(s.reachable) << "node-a's certificate (IP:127.0.0.1) answered for a node named 127.0.0.1";
  EXPECT_NE(s.last_error.find("is an IP address"), std::string::npos) << s.last_error;
}

// The provisioner's own files are watched too: a client certificate that
// nodevold refuses, replaced on disk by a good one, gets in without a
// restart of the registry (as when the Secret is rotated).
TEST_F(NodeRegistryTest, ReplacedClientCertificateAppliesWithoutRestart) {
  std::string certs = root_ + "/certs";
  TestCa other = MakeCa(certs, "other");
  TestCert stranger = MakeCert(other, certs, "provisioner-of-other-ca", {}, CertUse::kClient);
  fs::copy_file(stranger.cert, certs + "/live-client.crt");
  fs::copy_file(stranger.key, certs + "/live-client.key");
  nodes::TlsClientFiles files{ca_.cert, certs + "/live-client.crt", certs + "/live-client.key", 1};
  nodes::TlsChannelFactory tls(files);
  registry_ = MakeRegistry(tls, 2s);
  registry_->SetNodes({{"node-a", nodes_[0].address()}});
  ASSERT_TRUE(WaitFor([&] { return !State("node-a").last_error.empty(); }));
  EXPECT_FALSE(State("node-a").reachable) << "nodevold refuses a certificate of another CA";

  auto replace = [&](const std::string& from, const std::string& to) {
    fs::copy_file(from, to + ".new", fs::copy_options::overwrite_existing);
    fs::rename(to + ".new", to);
  };
  replace(client_.key, certs + "/live-client.key");
  replace(client_.cert, certs + "/live-client.crt");
  ASSERT_TRUE(WaitFor([&] { return State("node-a").reachable; }, 60s)) << State("node-a").last_error;
}

TEST_F(NodeRegistryTest, ClientFilesAreCheckedUpFront) {
  nodes::TlsClientFiles f = ClientFiles();
  f.key = root_ + "/absent.key";
  Status st = nodes::CheckTlsClientFiles(f);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("absent.key: cannot read the file"), std::string::npos) << st.message();
  f = ClientFiles();
  f.key = ca_.key;  // a key, not the certificate's
  st = nodes::CheckTlsClientFiles(f);
  EXPECT_NE(st.message().find("does not belong to the certificate"), std::string::npos) << st.message();
  f = ClientFiles();
  f.ca = client_.key;
  st = nodes::CheckTlsClientFiles(f);
  EXPECT_NE(st.message().find("no PEM certificate"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace nodevol::testing
