#include "nodes/node_registry.h"

#include <grpcpp/client_context.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>

#include "base/backoff.h"

namespace nodevol::nodes {

using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string SharedBy(const v1::PoolInfo& p) {
  if (p.backend() != "nfs") return "";
  auto server = p.attributes().find("server"), share = p.attributes().find("share");
  if (server == p.attributes().end() || share == p.attributes().end()) return "";
  return "nfs:" + server->second + ":" + share->second;
}

struct NodeRegistry::Entry {
  NodeEndpoint endpoint;
  std::shared_ptr<NodeClient> client;
  std::thread thread;
  // Guarded by NodeRegistry::mu_:
  NodeState state;
  bool removed = false;
  grpc::ClientContext* active = nullptr;  // the call in progress, for cancelling
  std::string cancel_reason;              // set by Cancel, reported as the error
  bool streaming = false;
  SteadyClock::time_point last_message;
};

NodeRegistry::NodeRegistry(Options options) : options_(std::move(options)) {
  if (options_.silence_timeout.count() <= 0)
    options_.silence_timeout = milliseconds(3000LL * std::max(1u, options_.heartbeat_seconds));
  watchdog_ = std::thread([this] { Watchdog(); });
}

NodeRegistry::~NodeRegistry() { Stop(); }

void NodeRegistry::SetNodes(const std::vector<NodeEndpoint>& nodes) {
  std::vector<std::shared_ptr<Entry>> gone;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopped_) return;
    std::map<std::string, NodeEndpoint> want;
    for (const NodeEndpoint& n : nodes) want.emplace(n.name, n);
    for (auto it = nodes_.begin(); it != nodes_.end();) {
      auto w = want.find(it->first);
      if (w != want.end() && w->second == it->second->endpoint) {
        ++it;
        continue;
      }
      it->second->removed = true;
      Cancel(it->second, "node removed");
      gone.push_back(it->second);
      it = nodes_.erase(it);
    }
    for (const auto& [name, endpoint] : want) {
      if (nodes_.count(name)) continue;
      auto e = std::make_shared<Entry>();
      e->endpoint = endpoint;
      e->client = std::make_shared<NodeClient>(name, options_.dial(endpoint), options_.call_timeout);
      e->state.name = name;
      e->state.address = endpoint.address;
      e->state.since = std::chrono::system_clock::now();
      nodes_.emplace(name, e);
      e->thread = std::thread([this, e] { Run(e); });
    }
  }
  cv_.notify_all();
  for (const auto& e : gone) e->thread.join();
}

std::vector<NodeState> NodeRegistry::Snapshot() const {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<NodeState> out;
  for (const auto& [name, e] : nodes_) out.push_back(e->state);
  return out;
}

bool NodeRegistry::Get(const std::string& node, NodeState* out) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return false;
  *out = it->second->state;
  return true;
}

std::shared_ptr<NodeClient> NodeRegistry::Client(const std::string& node) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = nodes_.find(node);
  return it == nodes_.end() ? nullptr : it->second->client;
}

std::string NodeRegistry::CsiDriver(const std::string& node) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = nodes_.find(node);
  return it == nodes_.end() ? "" : it->second->state.csi_driver;
}

void NodeRegistry::Stop() {
  std::vector<std::shared_ptr<Entry>> all;
  {
    std::lock_guard<std::mutex> l(mu_);
    stopped_ = true;
    for (auto& [name, e] : nodes_) {
      Cancel(e, "registry stopping");
      all.push_back(e);
    }
  }
  cv_.notify_all();
  for (const auto& e : all)
    if (e->thread.joinable()) e->thread.join();
  if (watchdog_.joinable()) watchdog_.join();
}

// Needs mu_.
void NodeRegistry::Cancel(const std::shared_ptr<Entry>& e, const std::string& reason) {
  if (e->active == nullptr) return;
  e->cancel_reason = reason;
  e->active->TryCancel();
}

void NodeRegistry::Notify(const std::shared_ptr<Entry>& e) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (e->removed || stopped_) return;
  }
  if (options_.on_change) options_.on_change(e->endpoint.name);
}

void NodeRegistry::SetReachable(const std::shared_ptr<Entry>& e, bool reachable, const std::string& error) {
  bool changed = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (e->removed || stopped_) return;
    NodeState& s = e->state;
    // A new node's first failure is news too: unknown became unreachable.
    changed = s.reachable != reachable || (!reachable && s.last_error.empty());
    if (s.reachable != reachable) s.since = std::chrono::system_clock::now();
    s.reachable = reachable;
    if (!reachable) s.last_error = error;
  }
  if (changed) Notify(e);
}

void NodeRegistry::Run(const std::shared_ptr<Entry>& e) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<double> jitter(0.0, 1.0);
  int failures = 0;
  for (;;) {
    bool delivered = false;
    Status st = Session(e, &delivered);
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stopped_ || e->removed) return;
    }
    if (delivered) failures = 0;
    milliseconds delay = ExponentialDelay(failures, options_.initial_backoff, options_.max_backoff, 0.2, jitter(rng));
    failures = std::min(failures + 1, 30);
    bool news;
    {
      std::lock_guard<std::mutex> l(mu_);
      news = e->state.reachable || e->state.last_error != st.message();
    }
    if (news)  // log changes, not every retry of a node that stays down the same way
      spdlog::warn("unreachable: {}; re-dialling in {} ms", st.message(), delay.count());
    SetReachable(e, false, st.message());
    {
      std::unique_lock<std::mutex> l(mu_);
      if (cv_.wait_for(l, delay, [&] { return stopped_ || e->removed; })) return;
    }
    // gRPC keeps its own reconnect backoff: ours decides when to try.
    grpc::experimental::ChannelResetConnectionBackoff(e->client->channel().get());
  }
}

Status NodeRegistry::Session(const std::shared_ptr<Entry>& e, bool* delivered) {
  v1::Node::Stub* stub = e->client->stub();
  const std::string where = "node " + e->endpoint.name + " (" + e->endpoint.address + ")";
  // Starts a call: registers ctx for cancelling; false when stopping.
  auto begin = [&](grpc::ClientContext* ctx, bool streaming) {
    std::lock_guard<std::mutex> l(mu_);
    if (stopped_ || e->removed) return false;
    e->active = ctx;
    e->cancel_reason.clear();
    e->streaming = streaming;
    e->last_message = SteadyClock::now();
    return true;
  };
  // Ends it: returns the reason it was cancelled, if it was.
  auto end = [&] {
    std::lock_guard<std::mutex> l(mu_);
    e->active = nullptr;
    e->streaming = false;
    return e->cancel_reason;
  };

  // Pools' backend kinds come from GetInfo (capacity messages carry none);
  // asked at every connect since a restarted nodevold may have new pools.
  // Wait up to connect_timeout for a connection; if there is none by then,
  // ask once more without waiting so the error is gRPC's reason (refused,
  // TLS handshake, certificate naming another node), not a bare deadline.
  v1::GetInfoResponse info;
  grpc::Status gs;
  for (bool wait : {true, false}) {
    grpc::ClientContext info_ctx;
    info_ctx.set_wait_for_ready(wait);
    info_ctx.set_deadline(std::chrono::system_clock::now() + options_.connect_timeout);
    if (!begin(&info_ctx, false)) return Status::Cancelled("stopping");
    gs = stub->GetInfo(&info_ctx, v1::GetInfoRequest(), &info);
    if (std::string reason = end(); !reason.empty()) return Status::Cancelled(where + ": " + reason);
    if (gs.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) break;
  }
  if (!gs.ok()) return FromGrpc(gs, where + ": GetInfo");
  {
    std::lock_guard<std::mutex> l(mu_);
    e->state.csi_driver = info.csi_driver();
  }
  struct Kind {
    std::string backend;
    bool size_enforced = true;
    std::string shared_by;
  };
  std::map<std::string, Kind> kinds;
  for (const v1::PoolInfo& p : info.pools()) kinds[p.name()] = {p.backend(), p.size_enforced(), SharedBy(p)};

  grpc::ClientContext ctx;  // no deadline: the watchdog cancels a silent stream
  v1::WatchCapacityRequest req;
  req.set_heartbeat_seconds(options_.heartbeat_seconds);
  if (!begin(&ctx, true)) return Status::Cancelled("stopping");
  std::unique_ptr<grpc::ClientReader<v1::GetCapacityResponse>> reader = stub->WatchCapacity(&ctx, req);
  v1::GetCapacityResponse msg;
  while (reader->Read(&msg)) {
    std::vector<PoolCapacity> pools;
    for (const v1::PoolCapacity& p : msg.pools()) {
      auto k = kinds.find(p.pool());
      bool known = k != kinds.end();
      pools.push_back({p.pool(), known ? k->second.backend : "", p.free_bytes(), p.total_bytes(), p.allocated_bytes(),
                       p.volume_count(), !known || k->second.size_enforced, known ? k->second.shared_by : ""});
    }
    std::sort(pools.begin(), pools.end(), [](const PoolCapacity& a, const PoolCapacity& b) { return a.name < b.name; });
    bool changed = false, became_reachable = false;
    {
      std::lock_guard<std::mutex> l(mu_);
      e->last_message = SteadyClock::now();
      NodeState& s = e->state;
      if (!s.reachable) {
        s.reachable = true;
        s.since = std::chrono::system_clock::now();
        became_reachable = true;
      }
      changed = became_reachable || s.pools != pools;
      if (s.pools != pools) s.figures_at = SteadyClock::now();
      s.pools = std::move(pools);
      s.sample = msg.sample();
    }
    if (became_reachable)
      spdlog::info("node {} ({}) reachable: {} pools", e->endpoint.name, e->endpoint.address, msg.pools_size());
    *delivered = true;
    if (changed) Notify(e);
  }
  grpc::Status fin = reader->Finish();
  if (std::string reason = end(); !reason.empty()) return Status::Unavailable(where + ": " + reason);
  if (fin.ok()) return Status::Unavailable(where + ": nodevold ended the capacity stream (stopping?)");
  return FromGrpc(fin, where + ": WatchCapacity");
}

void NodeRegistry::Watchdog() {
  const milliseconds silence = options_.silence_timeout;
  const milliseconds tick = std::clamp(silence / 4, milliseconds(10), milliseconds(1000));
  std::unique_lock<std::mutex> l(mu_);
  while (!cv_.wait_for(l, tick, [&] { return stopped_; })) {
    auto now = SteadyClock::now();
    for (auto& [name, e] : nodes_) {
      if (e->streaming && e->cancel_reason.empty() && now - e->last_message > silence)
        Cancel(e, "no capacity message for " + std::to_string(silence.count()) + " ms (heartbeat every " +
                      std::to_string(options_.heartbeat_seconds) + " s)");
    }
  }
}

}  // namespace nodevol::nodes
