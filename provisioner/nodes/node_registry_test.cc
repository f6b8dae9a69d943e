// NodeRegistry and NodeClient against fake nodevolds: real gRPC servers in
// this process (in-process channels, the registry's Dialer seam), whose
// capacity streams the tests drive message by message.
#include "nodes/node_registry.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

namespace nodevol::nodes {
namespace {

using namespace std::chrono_literals;

// Waits up to 10 s for pred (the registry's threads work asynchronously).
template <typename Pred>
bool WaitFor(Pred pred) {
  for (auto until = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < until;) {
    if (pred()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return pred();
}

// A nodevold whose WatchCapacity sends what Push() queues, and ends when
// EndStream() says so.
class FakeNode final : public v1::Node::Service {
 public:
  explicit FakeNode(std::string name) : name_(std::move(name)) {
    grpc::ServerBuilder b;
    b.RegisterService(this);
    server_ = b.BuildAndStart();
  }
  ~FakeNode() override { server_->Shutdown(std::chrono::system_clock::now()); }

  std::shared_ptr<grpc::Channel> Channel() { return server_->InProcessChannel(grpc::ChannelArguments()); }

  void Push(uint64_t free, uint64_t total, bool heartbeat = false, uint32_t volumes = 0) {
    v1::GetCapacityResponse m;
    for (const char* pool : {"fast", "default"}) {
      v1::PoolCapacity* p = m.add_pools();
      p->set_pool(pool);
      p->set_free_bytes(std::string(pool) == "fast" ? free : free * 2);
      p->set_total_bytes(total);
      p->set_volume_count(volumes);
    }
    m.set_heartbeat(heartbeat);
    std::lock_guard<std::mutex> l(mu_);
    queue_.push_back(m);
  }
  // Ends the current stream with status (next streams work again).
  void EndStream(grpc::Status status) {
    std::lock_guard<std::mutex> l(mu_);
    end_ = status;
  }
  void FailGetInfo(bool fail) { fail_info_ = fail; }
  int streams() const { return streams_; }
  int cancelled_streams() const { return cancelled_; }
  int open_streams() const { return open_; }

  grpc::Status GetInfo(grpc::ServerContext*, const v1::GetInfoRequest*, v1::GetInfoResponse* resp) override {
    if (fail_info_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake GetInfo failure");
    resp->set_node_name(name_);
    auto* p = resp->add_pools();
    p->set_name("default");
    p->set_backend("dir");
    p = resp->add_pools();
    p->set_name("fast");
    p->set_backend("lvm");
    p->set_size_enforced(true);
    return grpc::Status::OK;
  }

  grpc::Status WatchCapacity(grpc::ServerContext* ctx, const v1::WatchCapacityRequest* req,
                             grpc::ServerWriter<v1::GetCapacityResponse>* w) override {
    ++streams_;
    ++open_;
    heartbeat_asked_ = req->heartbeat_seconds();
    grpc::Status result = grpc::Status::OK;
    while (!ctx->IsCancelled()) {
      std::optional<v1::GetCapacityResponse> next;
      {
        std::lock_guard<std::mutex> l(mu_);
        if (end_) {
          result = *end_;
          end_.reset();
          break;
        }
        if (!queue_.empty()) {
          next = queue_.front();
          queue_.erase(queue_.begin());
        }
      }
      if (next) {
        if (!w->Write(*next)) break;
      } else {
        std::this_thread::sleep_for(2ms);
      }
    }
    if (ctx->IsCancelled()) ++cancelled_;
    --open_;
    return result;
  }

  grpc::Status CreateVolume(grpc::ServerContext*, const v1::CreateVolumeRequest* req,
                            v1::CreateVolumeResponse* resp) override {
    if (req->size_bytes() > 100) return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "pool fast is full");
    resp->mutable_volume()->set_name(req->name());
    return grpc::Status::OK;
  }

  std::atomic<unsigned> heartbeat_asked_{0};

 private:
  std::string name_;
  std::unique_ptr<grpc::Server> server_;
  std::mutex mu_;
  std::vector<v1::GetCapacityResponse> queue_;
  std::optional<grpc::Status> end_;
  std::atomic<bool> fail_info_{false};
  std::atomic<int> streams_{0}, cancelled_{0}, open_{0};
};

class RegistryTest : public ::testing::Test {
 protected:
  // Fakes by address; the dialer connects an endpoint to the fake of its address.
  std::map<std::string, std::unique_ptr<FakeNode>> fakes_;
  std::mutex changes_mu_;
  std::vector<std::string> changes_;
  std::atomic<int> dials_{0};
  const NodeRegistry* watched_ = nullptr;  // under changes_mu_
  std::vector<std::string> seen_;           // "node:free" per change once watched_

  NodeRegistry::Options Opts() {
    NodeRegistry::Options o;
    o.dial = [this](const NodeEndpoint& e) {
      ++dials_;
      return fakes_.at(e.address)->Channel();
    };
    o.on_change = [this](const std::string& node) {
      std::lock_guard<std::mutex> l(changes_mu_);
      changes_.push_back(node);
      // What the node's second pool showed when the change was announced
      // (on_change runs outside the registry's lock, in the node's stream
      // callback: messages before it were all handled).
      NodeState s;
      if (watched_ && watched_->Get(node, &s) && s.pools.size() > 1)
        seen_.push_back(node + ":" + std::to_string(s.pools[1].free_bytes));
    };
    o.initial_backoff = 10ms;
    o.max_backoff = 40ms;
    o.heartbeat_seconds = 7;
    o.silence_timeout = 1h;  // only the silence test relies on it
    return o;
  }
  FakeNode* Fake(const std::string& address, const std::string& name) {
    fakes_[address] = std::make_unique<FakeNode>(name);
    return fakes_[address].get();
  }
  size_t Changes() {
    std::lock_guard<std::mutex> l(changes_mu_);
    return changes_.size();
  }
  static NodeState State(const NodeRegistry& r, const std::string& node) {
    NodeState s;
    EXPECT_TRUE(r.Get(node, &s)) << node;
    return s;
  }
};


TEST(FromGrpc, MapsEveryCodeOneToOneAndNamesTheContext) {
  for (int c = 1; c <= 16; ++c) {
    Status st = FromGrpc(grpc::Status(static_cast<grpc::StatusCode>(c), "why"), "node a: GetInfo");
    EXPECT_EQ(static_cast<int>(st.code()), c);
    EXPECT_EQ(st.message(), "node a: GetInfo: why");
    if (c != 2) {
      EXPECT_NE(st.code_name(), "UNKNOWN") << c << " has a name of its own";
    }
  }
  EXPECT_TRUE(FromGrpc(grpc::Status::OK, "x").ok());
  EXPECT_EQ(FromGrpc(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "no"), "c").code(),
            Status::Code::kPermissionDenied);
}

TEST_F(RegistryTest, KeepsEachNodesPoolsCurrentAndIgnoresHeartbeats) {
  FakeNode* a = Fake("a:1", "node-a");
  FakeNode* b = Fake("b:1", "node-b");
  a->Push(50, 100);
  b->Push(7, 10);
  NodeRegistry r(Opts());
  r.SetNodes({{"node-a", "a:1"}, {"node-b", "b:1"}});
  ASSERT_TRUE(WaitFor([&] { return State(r, "node-a").reachable && State(r, "node-b").reachable; }));
  EXPECT_EQ(a->heartbeat_asked_, 7u);

  std::vector<NodeState> snap = r.Snapshot();
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].name, "node-a");
  EXPECT_EQ(snap[0].address, "a:1");
  ASSERT_EQ(snap[0].pools.size(), 2u);
  EXPECT_EQ(snap[0].pools[0], (PoolCapacity{"default", "dir", 100, 100, 0, 0, false}));  // a dir pool without quotas
  EXPECT_EQ(snap[0].pools[1], (PoolCapacity{"fast", "lvm", 50, 100, 0, 0, true}));
  EXPECT_EQ(snap[1].pools[1].free_bytes, 7u);
  ASSERT_TRUE(WaitFor([&] { return Changes() == 2; })) << "one change per node becoming reachable";

  a->Push(50, 100, /*heartbeat=*/true);
  a->Push(40, 100, false, 1);  // a volume was created
  ASSERT_TRUE(WaitFor([&] { return State(r, "node-a").pools[1].free_bytes == 40; }));
  EXPECT_EQ(State(r, "node-a").pools[1].volume_count, 1u);
  ASSERT_TRUE(WaitFor([&] { return Changes() == 3; }));
  {
    std::lock_guard<std::mutex> l(changes_mu_);
    watched_ = &r;
  }
  a->Push(40, 100, true, 1);
  b->Push(7, 10, true);
  // A real change after the heartbeats on each stream. Each stream handles
  // its messages in order, so once both changes are announced, a heartbeat
  // announced as a change would be in seen_ before them, with the figures
  // it repeated (a:40, b:7). No sleep: the changes are the events waited on.
  a->Push(30, 100, false, 2);
  b->Push(6, 10, false);
  auto seen = [&] {
    std::lock_guard<std::mutex> l(changes_mu_);
    return seen_;
  };
  ASSERT_TRUE(WaitFor([&] {
    std::vector<std::string> s = seen();
    return std::count(s.begin(), s.end(), "node-a:30") && std::count(s.begin(), s.end(), "node-b:6");
  }));
  std::vector<std::string> s = seen();
  std::sort(s.begin(), s.end());
  EXPECT_EQ(s, (std::vector<std::string>{"node-a:30", "node-b:6"})) << "heartbeats with the same figures are not changes";
  {
    std::lock_guard<std::mutex> l(changes_mu_);
    watched_ = nullptr;
  }
  EXPECT_EQ(a->streams(), 1);
}

TEST_F(RegistryTest, StreamErrorMarksUnreachableThenRedials) {
  FakeNode* a = Fake("a:1", "node-a");
  a->Push(50, 100);
  NodeRegistry r(Opts());
  r.SetNodes({{"node-a", "a:1"}});
  ASSERT_TRUE(WaitFor([&] { return State(r, "node-a").reachable; }));
  auto reachable_since = State(r, "node-a").since;

  a->FailGetInfo(true);  // the re-dial fails too, until we say otherwise
  a->EndStream(grpc::Status(grpc::StatusCode::UNAVAILABLE, "nodevold went away"));
  ASSERT_TRUE(WaitFor([&] { return !State(r, "node-a").reachable; }));
  NodeState down = State(r, "node-a");
  EXPECT_NE(down.last_error.find("nodevold went away"), std::string::npos) << down.last_error;
  EXPECT_NE(down.last_error.find("node node-a (a:1)"), std::string::npos) << down.last_error;
  EXPECT_GE(down.since, reachable_since);
  EXPECT_EQ(down.pools.size(), 2u) << "the last figures stay visible";
  ASSERT_TRUE(WaitFor([&] { return State(r, "node-a").last_error.find("fake GetInfo failure") != std::string::npos; }))
      << "it keeps re-dialling";
  EXPECT_FALSE(State(r, "node-a").reachable);

  a->FailGetInfo(false);
  a->Push(30, 100);
  ASSERT_TRUE(WaitFor([&] { return State(r, "node-a").reachable; }));
  EXPECT_EQ(State(r, "node-a").pools[1].free_bytes, 30u);
  EXPECT_EQ(a->streams(), 2);
  EXPECT_EQ(dials_, 1) << "one channel per node, reconnected";
}

TEST_F(RegistryTest, SilentStreamIsCancelledAndMarkedUnreachable) {
  FakeNode* a = Fake("a:1", "node-a");
  a->Push(50, 100);
  NodeRegistry::Options o = Opts();
  o.silence_timeout = 100ms;
  o.initial_backoff = o.max_backoff = 1h;  // stays down: we look at the first failure
  NodeRegistry r(o);
  r.SetNodes({{"node-a", "a:1"}});
  ASSERT_TRUE(WaitFor([&] { return !State(r, "node-a").last_error.empty(); }));
  NodeState s = State(r, "node-a");
  EXPECT_FALSE(s.reachable);
  EXPECT_NE(s.last_error.find("no capacity message for 100 ms"), std::string::npos) << s.last_error;
  ASSERT_TRUE(WaitFor([&] { return a->cancelled_streams() == 1; })) << "the stream itself was cancelled";
}

TEST_F(RegistryTest, SetNodesDropsAndRedialsOnAddressChange) {
  FakeNode* a = Fake("a:1", "node-a");
  FakeNode* a2 = Fake("a:2", "node-a");
  FakeNode* b = Fake("b:1", "node-b");
  a->Push(50, 100);
  a2->Push(20, 100);
  b->Push(7, 10);
  NodeRegistry r(Opts());
  r.SetNodes({{"node-a", "a:1"}, {"node-b", "b:1"}});
  ASSERT_TRUE(WaitFor([&] { return State(r, "node-a").reachable && State(r, "node-b").reachable; }));

  r.SetNodes({{"node-a", "a:2"}});  // b gone, a moved
  NodeState s;
  EXPECT_FALSE(r.Get("node-b", &s));
  EXPECT_EQ(r.Client("node-b"), nullptr);
  EXPECT_EQ(r.Snapshot().size(), 1u);
  ASSERT_TRUE(WaitFor([&] { return b->open_streams() == 0 && a->open_streams() == 0; }))
      << "dropped streams are cancelled";
  ASSERT_TRUE(WaitFor([&] { return State(r, "node-a").reachable; }));
  EXPECT_EQ(State(r, "node-a").address, "a:2");
  EXPECT_EQ(State(r, "node-a").pools[1].free_bytes, 20u);
  EXPECT_EQ(dials_, 3);

  r.SetNodes({{"node-a", "a:2"}});  // unchanged: nothing happens
  EXPECT_EQ(dials_, 3);
  EXPECT_EQ(a2->streams(), 1);
}

TEST_F(RegistryTest, StopEndsStreamsAndBackoffSleeps) {
  FakeNode* a = Fake("a:1", "node-a");
  FakeNode* b = Fake("b:1", "node-b");
  a->Push(50, 100);
  b->FailGetInfo(true);
  NodeRegistry::Options o = Opts();
  o.initial_backoff = o.max_backoff = 1h;
  NodeRegistry r(o);
  r.SetNodes({{"node-a", "a:1"}, {"node-b", "b:1"}});
  ASSERT_TRUE(WaitFor([&] { return State(r, "node-a").reachable && !State(r, "node-b").last_error.empty(); }));
  r.Stop();  // would hang for an hour if the sleep or the stream were not interrupted
  EXPECT_TRUE(WaitFor([&] { return a->open_streams() == 0; }));
  r.SetNodes({{"node-c", "c:1"}});  // ignored after Stop
  EXPECT_EQ(r.Snapshot().size(), 2u);
}

// Threads named as this program: those made with std::thread (gRPC names
// its own: "grpcpp_sync_ser", "default-executo", ...).
int ThreadsOfOurOwn() {
  auto comm = [](const std::filesystem::path& p) {
    std::string s;
    std::getline(std::ifstream(p / "comm"), s);
    return s;
  };
  const std::string own = comm("/proc/self");
  int n = 0;
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task")) n += comm(t.path()) == own ? 1 : 0;
  return n;
}

TEST_F(RegistryTest, ManyNodesNeedNoThreadEach) {
  // A provisioner watching a thousand nodes must not keep a thousand
  // threads blocked in Read (it did: 0.26 MiB and a thread per node).
  constexpr int kNodes = 40;
  std::vector<NodeEndpoint> endpoints;
  for (int i = 0; i < kNodes; ++i) {
    std::string addr = "n" + std::to_string(i) + ":1", name = "node-" + std::to_string(i);
    Fake(addr, name)->Push(10 + i, 100);
    endpoints.push_back({name, addr});
  }
  const int before = ThreadsOfOurOwn();
  NodeRegistry r(Opts());
  r.SetNodes(endpoints);
  ASSERT_TRUE(WaitFor([&] {
    auto snap = r.Snapshot();
    return std::all_of(snap.begin(), snap.end(), [](const NodeState& s) { return s.reachable; });
  }));
  EXPECT_EQ(State(r, "node-39").pools[1].free_bytes, 49u);
  EXPECT_LE(ThreadsOfOurOwn() - before, 1) << "the registry's one thread at most, not one per node";
  for (auto& [addr, fake] : fakes_) EXPECT_EQ(fake->open_streams(), 1) << addr;
  r.Stop();
  EXPECT_TRUE(WaitFor([&] {
    return std::all_of(fakes_.begin(), fakes_.end(), [](const auto& f) { return f.second->open_streams() == 0; });
  }));
}

TEST_F(RegistryTest, ClientCallsTheNodeAndNamesItInErrors) {
  FakeNode* a = Fake("a:1", "node-a");
  NodeRegistry r(Opts());
  r.SetNodes({{"node-a", "a:1"}});
  std::shared_ptr<NodeClient> c = r.Client("node-a");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(r.Client("node-z"), nullptr);
  v1::CreateVolumeRequest req;
  req.set_name("pvc-1");
  req.set_size_bytes(10);
  v1::CreateVolumeResponse resp;
  ASSERT_TRUE(c->CreateVolume(req, &resp).ok());
  EXPECT_EQ(resp.volume().name(), "pvc-1");
  req.set_size_bytes(1000);
  Status st = c->CreateVolume(req, &resp);
  EXPECT_EQ(st.code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(st.message(), "node node-a: CreateVolume: pool fast is full");
  v1::GetVolumeResponse got;
  st = c->GetVolume(v1::GetVolumeRequest(), &got);
  EXPECT_EQ(st.code(), Status::Code::kUnimplemented) << "the fake has no GetVolume: " << st.ToString();
  (void)a;
}

}  // namespace
}  // namespace nodevol::nodes
