#include "nodes/node_registry.h"

#include <grpcpp/client_context.h>
#include <grpcpp/support/client_callback.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "base/backoff.h"
#include "base/names.h"

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
  // Guarded by NodeRegistry::mu_:
  NodeState state;
  bool removed = false;
  bool busy = false;  // a session is under way (dialled, not yet Ended)
  int calls = 0;      // call objects alive (see Alive)
  SteadyClock::time_point due;  // when not busy: when to dial next
  Backoff backoff;
  std::shared_ptr<grpc::ClientContext> active;  // the call in progress, for cancelling
  std::string cancel_reason;                    // set by Cancel, reported as the error
  bool streaming = false;
  SteadyClock::time_point last_message;
  // Set by InfoDone before the stream starts, read by Record (the stream's
  // callbacks): no lock needed, the stream starts after it is written.
  struct Kind {
    std::string backend;
    bool size_enforced = true;
    std::string shared_by;
  };
  std::map<std::string, Kind> kinds;

  Entry(NodeEndpoint endpoint_, const Options& o)
      : endpoint(std::move(endpoint_)), backoff(o.initial_backoff, o.max_backoff, 0.2) {}
};

// Counts a call object alive. Declared first in one, so that it goes last,
// after the call's context (which holds a reference to the channel).
struct NodeRegistry::Alive {
  Alive(NodeRegistry* r, Entry* e) : r(r), e(e) {
    std::lock_guard<std::mutex> l(r->mu_);
    ++e->calls;
  }
  ~Alive() {
    std::lock_guard<std::mutex> l(r->mu_);  // notified under the lock: see Ended
    --e->calls;
    r->cv_.notify_all();
  }
  Alive(const Alive&) = delete;
  Alive& operator=(const Alive&) = delete;
  NodeRegistry* r;
  Entry* e;
};

bool NodeRegistry::Quiet(const Entry& e) { return !e.busy && e.calls == 0; }

// One WatchCapacity stream. It owns itself from Start until OnDone, the
// last callback gRPC makes; Cancel may hold its context a moment longer.
class NodeRegistry::Stream : public grpc::ClientReadReactor<v1::GetCapacityResponse> {
 public:
  Stream(NodeRegistry* registry, Entry* e) : alive_(registry, e), registry_(registry), e_(e) {
    req_.set_heartbeat_seconds(registry_->options_.heartbeat_seconds);
  }
  static void Start(NodeRegistry* registry, Entry* e) {
    auto s = std::make_shared<Stream>(registry, e);
    // The context shares the stream's lifetime (aliasing pointer).
    std::shared_ptr<grpc::ClientContext> ctx(s, &s->ctx_);  // no deadline: the loop cancels a silent stream
    if (!registry->Begin(e, ctx, true)) return registry->Ended(e, Status::Cancelled("stopping"), false);
    s->self_ = s;
    e->client->stub()->async()->WatchCapacity(&s->ctx_, &s->req_, s.get());
    s->StartRead(&s->msg_);
    s->StartCall();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream is over: OnDone follows
    delivered_ = true;
    registry_->Record(e_, msg_);
    StartRead(&msg_);
  }
  void OnDone(const grpc::Status& fin) override {
    const std::string where = registry_->Where(*e_);
    Status st;
    if (std::string reason = registry_->End(e_); !reason.empty())
      st = Status::Unavailable(where + ": " + reason);
    else if (fin.ok())
      st = Status::Unavailable(where + ": nodevold ended the capacity stream (stopping?)");
    else
      st = FromGrpc(fin, where + ": WatchCapacity");
    registry_->Ended(e_, st, delivered_);
    self_.reset();  // may delete this: nothing after it
  }

 private:
  Alive alive_;  // first: destroyed last
  NodeRegistry* registry_;
  Entry* e_;
  grpc::ClientContext ctx_;
  v1::WatchCapacityRequest req_;
  v1::GetCapacityResponse msg_;
  bool delivered_ = false;
  std::shared_ptr<Stream> self_;
};

NodeRegistry::NodeRegistry(Options options) : options_(std::move(options)) {
  if (options_.silence_timeout.count() <= 0)
    options_.silence_timeout = milliseconds(3000LL * std::max(1u, options_.heartbeat_seconds));
  loop_ = std::thread([this] { Loop(); });
}

NodeRegistry::~NodeRegistry() { Stop(); }

std::string NodeRegistry::Where(const Entry& e) const {
  return "node " + e.endpoint.name + " (" + e.endpoint.address + ")";
}

void NodeRegistry::SetNodes(const std::vector<NodeEndpoint>& nodes) {
  std::vector<std::shared_ptr<Entry>> gone;
  std::vector<std::shared_ptr<grpc::ClientContext>> cancel;
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
      if (auto ctx = Cancel(it->second.get(), "node removed")) cancel.push_back(ctx);
      gone.push_back(it->second);
      it = nodes_.erase(it);
    }
    for (const auto& [name, endpoint] : want) {
      if (nodes_.count(name)) continue;
      auto e = std::make_shared<Entry>(endpoint, options_);
      e->client = std::make_shared<NodeClient>(name, options_.dial(endpoint), options_.call_timeout);
      e->state.name = name;
      e->state.address = endpoint.address;
      e->state.since = std::chrono::system_clock::now();
      e->due = SteadyClock::now();
      nodes_.emplace(name, e);
    }
    wake_ = true;
  }
  cv_.notify_all();
  for (const auto& ctx : cancel) ctx->TryCancel();
  cancel.clear();  // they keep their calls' objects alive: see Quiet
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] { return std::all_of(gone.begin(), gone.end(), [](const auto& e) { return Quiet(*e); }); });
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
  std::vector<std::shared_ptr<grpc::ClientContext>> cancel;
  {
    std::lock_guard<std::mutex> l(mu_);
    stopped_ = true;
    for (auto& [name, e] : nodes_)
      if (auto ctx = Cancel(e.get(), "registry stopping")) cancel.push_back(ctx);
  }
  cv_.notify_all();
  for (const auto& ctx : cancel) ctx->TryCancel();
  cancel.clear();  // they keep their calls' objects alive: see Quiet
  if (loop_.joinable()) loop_.join();
  // The loop may have dialled a node just before it saw stopped_: that
  // session ends at its Begin. Wait for every session to be over, since
  // their callbacks use this object.
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [&] {
    return std::all_of(nodes_.begin(), nodes_.end(), [](const auto& n) { return Quiet(*n.second); });
  });
}

std::shared_ptr<grpc::ClientContext> NodeRegistry::Cancel(Entry* e, const std::string& reason) {
  if (e->active == nullptr || !e->cancel_reason.empty()) return nullptr;
  e->cancel_reason = reason;
  return e->active;
}

void NodeRegistry::Notify(Entry* e) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (e->removed || stopped_) return;
  }
  if (options_.on_change) options_.on_change(e->endpoint.name);
}

void NodeRegistry::SetReachable(Entry* e, bool reachable, const std::string& error) {
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

bool NodeRegistry::Begin(Entry* e, std::shared_ptr<grpc::ClientContext> ctx, bool streaming) {
  std::lock_guard<std::mutex> l(mu_);
  if (stopped_ || e->removed) return false;
  e->active = std::move(ctx);
  e->cancel_reason.clear();
  e->streaming = streaming;
  e->last_message = SteadyClock::now();
  return true;
}

std::string NodeRegistry::End(Entry* e) {
  std::lock_guard<std::mutex> l(mu_);
  e->active = nullptr;
  e->streaming = false;
  return e->cancel_reason;
}

void NodeRegistry::Dial(Entry* e) {
  // Its certificate would be checked against IP addresses a node chooses.
  if (Status named = CheckNodeIdentityName(e->endpoint.name); !named.ok())
    return Ended(e, Status::FailedPrecondition(Where(*e) + ": not dialled: " + named.message()), false);
  // gRPC keeps its own reconnect backoff: ours decides when to try.
  grpc::experimental::ChannelResetConnectionBackoff(e->client->channel().get());
  AskInfo(e, true);
}

// Pools' backend kinds come from GetInfo (capacity messages carry none);
// asked at every connect since a restarted nodevold may have new pools.
// Wait up to connect_timeout for a connection; if there is none by then,
// ask once more without waiting so the error is gRPC's reason (refused,
// TLS handshake, certificate naming another node), not a bare deadline.
void NodeRegistry::AskInfo(Entry* e, bool wait_for_ready) {
  struct Call {
    Call(NodeRegistry* r, Entry* e) : alive(r, e) {}
    Alive alive;  // first: destroyed last
    grpc::ClientContext ctx;
    v1::GetInfoRequest req;
    v1::GetInfoResponse info;
  };
  auto call = std::make_shared<Call>(this, e);
  call->ctx.set_wait_for_ready(wait_for_ready);
  call->ctx.set_deadline(std::chrono::system_clock::now() + options_.connect_timeout);
  if (!Begin(e, std::shared_ptr<grpc::ClientContext>(call, &call->ctx), false))
    return Ended(e, Status::Cancelled("stopping"), false);
  e->client->stub()->async()->GetInfo(&call->ctx, &call->req, &call->info,
                                      [this, e, call, wait_for_ready](grpc::Status gs) {
                                        InfoDone(e, wait_for_ready, gs, call->info);
                                      });
}

void NodeRegistry::InfoDone(Entry* e, bool wait_for_ready, const grpc::Status& gs,
                            const v1::GetInfoResponse& info) {
  const std::string where = Where(*e);
  if (std::string reason = End(e); !reason.empty()) return Ended(e, Status::Cancelled(where + ": " + reason), false);
  if (wait_for_ready && gs.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) return AskInfo(e, false);
  if (!gs.ok()) return Ended(e, FromGrpc(gs, where + ": GetInfo"), false);
  {
    std::lock_guard<std::mutex> l(mu_);
    e->state.csi_driver = info.csi_driver();
  }
  e->kinds.clear();
  for (const v1::PoolInfo& p : info.pools()) e->kinds[p.name()] = {p.backend(), p.size_enforced(), SharedBy(p)};
  Stream::Start(this, e);
}

void NodeRegistry::Record(Entry* e, const v1::GetCapacityResponse& msg) {
  std::vector<PoolCapacity> pools;
  for (const v1::PoolCapacity& p : msg.pools()) {
    auto k = e->kinds.find(p.pool());
    bool known = k != e->kinds.end();
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
  if (changed) Notify(e);
}

void NodeRegistry::Ended(Entry* e, const Status& st, bool delivered) {
  milliseconds delay{0};
  bool news = false, over = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    over = stopped_ || e->removed;
    if (!over) {
      if (delivered) e->backoff.Reset();
      delay = e->backoff.Next();
      news = e->state.reachable || e->state.last_error != st.message();
    }
  }
  if (!over) {
    if (news)  // log changes, not every retry of a node that stays down the same way
      spdlog::warn("unreachable: {}; re-dialling in {} ms", st.message(), delay.count());
    SetReachable(e, false, st.message());
  }
  // Notified under the lock, as in ~Alive: once a waiter in Stop sees the
  // entry Quiet, no callback touches the registry any more.
  std::lock_guard<std::mutex> l(mu_);
  e->busy = false;
  e->due = SteadyClock::now() + delay;
  wake_ = true;
  cv_.notify_all();
}

void NodeRegistry::Loop() {
  const milliseconds silence = options_.silence_timeout;
  const milliseconds tick = std::clamp(silence / 4, milliseconds(10), milliseconds(1000));
  std::unique_lock<std::mutex> l(mu_);
  while (!stopped_) {
    auto now = SteadyClock::now();
    auto next = now + tick;
    std::vector<std::shared_ptr<Entry>> dial;
    std::vector<std::shared_ptr<grpc::ClientContext>> cancel;
    for (auto& [name, e] : nodes_) {
      if (!e->busy) {
        if (e->due <= now) {
          e->busy = true;
          dial.push_back(e);
        } else {
          next = std::min(next, e->due);
        }
      }
      if (e->streaming && e->cancel_reason.empty() && now - e->last_message > silence)
        if (auto ctx = Cancel(e.get(), "no capacity message for " + std::to_string(silence.count()) +
                                     " ms (heartbeat every " + std::to_string(options_.heartbeat_seconds) + " s)"))
          cancel.push_back(ctx);
    }
    wake_ = false;
    l.unlock();
    for (const auto& e : dial) Dial(e.get());
    for (const auto& ctx : cancel) ctx->TryCancel();
    // Before waiting: the contexts keep their calls' objects alive, and
    // SetNodes waits for those to be gone (Quiet).
    dial.clear();
    cancel.clear();
    l.lock();
    cv_.wait_until(l, next, [&] { return stopped_ || wake_; });
  }
}

}  // namespace nodevol::nodes
