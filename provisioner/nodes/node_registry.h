// NodeRegistry: the provisioner's live view of the nodes running nodevold.
//
// SetNodes gives the current list (name + host:port), whenever the Node
// cache changes; nodes are added, dropped, or re-dialled when their address
// changes. Each node has one WatchCapacity stream open: at every
// (re)connect the registry asks GetInfo for the pools' backend kinds, then
// records each capacity message (free/total/allocated bytes per pool). A
// stream that ends, fails, or stays silent for silence_timeout (nodevold
// sends a heartbeat every heartbeat_seconds) marks the node unreachable
// with the error, and the node is re-dialled after a backoff: 1 s doubling
// to 60 s, plus up to 20 % jitter, back to 1 s once a stream delivered.
//
// The calls use gRPC's callback API: no thread per node (a provisioner
// watching 1,000 nodes had 1,000 threads waiting in Read). One thread of
// the registry's own dials when a backoff ends and cancels silent streams.
//
// on_change(node) runs on gRPC's callback threads, possibly several at
// once, after a node's reachability or any of its pool figures changed
// (not on heartbeats); it may call Snapshot() or Client() but must not
// call SetNodes() or Stop(), and must be quick and never block (enqueue
// work): it holds up other nodes' messages. Everything is thread-safe;
// Stop() (or the destructor) cancels the calls and waits for their end.
#pragma once

#include <grpcpp/channel.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nodes/node_client.h"

namespace nodevol::nodes {

struct NodeEndpoint {
  std::string name;     // Kubernetes node name, also the TLS server name
  std::string address;  // host:port of its nodevold --tls-listen
  bool operator==(const NodeEndpoint&) const = default;
};

struct PoolCapacity {
  std::string name;
  std::string backend;  // "dir", "lvm", "nfs" (from GetInfo)
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
  uint64_t allocated_bytes = 0;
  uint32_t volume_count = 0;
  // False when the pool records sizes without enforcing them (a dir pool
  // without quotas, NFS): its free space does not drop for an empty volume.
  bool size_enforced = true;
  // NFS: "nfs:<server>:<share>" from GetInfo, equal on every node serving
  // the export (PoolSeen::shared_by); "" otherwise.
  std::string shared_by = {};
  bool operator==(const PoolCapacity&) const = default;
};

struct NodeState {
  std::string name;
  std::string address;
  bool reachable = false;  // a stream is open and not silent
  std::string last_error;  // why it is (or last was) unreachable; "" = never failed
  std::chrono::system_clock::time_point since;  // when `reachable` last changed (or the node was added)
  std::vector<PoolCapacity> pools;  // last figures seen, sorted by name; kept while unreachable
  std::chrono::steady_clock::time_point figures_at;  // when `pools` last changed
  // nodevold's number for the capacity sample `pools` come from (0: not
  // told; CreateVolumeResponse.capacity_sample says which one has a volume).
  uint64_t sample = 0;
  // GetInfo's csi_driver: "" when the node's nodevold serves no CSI (off,
  // or older than the CSI front door).
  std::string csi_driver;
};

// PoolCapacity::shared_by of a pool GetInfo describes.
std::string SharedBy(const v1::PoolInfo& pool);

class NodeRegistry {
 public:
  using Dialer = std::function<std::shared_ptr<grpc::Channel>(const NodeEndpoint&)>;

  struct Options {
    Dialer dial;  // e.g. [&f](const NodeEndpoint& e) { return f.Dial(e.address, e.name); }
    std::function<void(const std::string& node)> on_change;
    std::chrono::milliseconds call_timeout{60000};     // NodeClient calls
    std::chrono::milliseconds connect_timeout{10000};  // GetInfo at (re)dial, waiting for the connection
    std::chrono::milliseconds initial_backoff{1000};
    std::chrono::milliseconds max_backoff{60000};
    unsigned heartbeat_seconds = 10;                   // asked of nodevold
    std::chrono::milliseconds silence_timeout{0};      // 0 = 3 heartbeats
  };

  explicit NodeRegistry(Options options);
  ~NodeRegistry();
  NodeRegistry(const NodeRegistry&) = delete;
  NodeRegistry& operator=(const NodeRegistry&) = delete;

  // Replaces the set of nodes. Names must be unique (later duplicates are
  // ignored). Returns after dropped nodes' calls have ended.
  void SetNodes(const std::vector<NodeEndpoint>& nodes);

  // Every node, sorted by name.
  std::vector<NodeState> Snapshot() const;
  // One node; false when it is not registered.
  bool Get(const std::string& node, NodeState* out) const;

  // The client for calls to node (shared with its capacity stream), or
  // null when the node is not registered. Usable while unreachable: calls
  // then fail fast with UNAVAILABLE.
  std::shared_ptr<NodeClient> Client(const std::string& node) const;
  // The node's NodeState::csi_driver ("" when unknown): one lookup, no
  // Snapshot, since provisioning asks it for every claim.
  std::string CsiDriver(const std::string& node) const;

  void Stop();

 private:
  struct Entry;
  struct Alive;
  class Stream;

  // The calls' callbacks hold a plain Entry*: the registry keeps each entry
  // until its session is over and its call objects are gone. They must not
  // own it: the entry owns the node's channel, and gRPC 1.51 cannot have
  // its last channel destroyed on one of its callback threads (that thread
  // joins itself and frees the queue it is reading: a double free, seen
  // under ASan).
  //
  // A session: GetInfo (waiting for a connection, then once more without
  // waiting so the error is gRPC's reason), then the capacity stream.
  void Dial(Entry* e);
  void AskInfo(Entry* e, bool wait_for_ready);
  void InfoDone(Entry* e, bool wait_for_ready, const grpc::Status& gs, const v1::GetInfoResponse& info);
  void Record(Entry* e, const v1::GetCapacityResponse& msg);
  // The session ended with st: unreachable, next dial after a backoff.
  void Ended(Entry* e, const Status& st, bool delivered);
  // Registers ctx as e's call in progress; false when stopping or removed.
  bool Begin(Entry* e, std::shared_ptr<grpc::ClientContext> ctx, bool streaming);
  // Ends it: the reason it was cancelled, "" if it was not.
  std::string End(Entry* e);
  // Needs mu_: e's session is over and its call objects are gone.
  static bool Quiet(const Entry& e);
  void SetReachable(Entry* e, bool reachable, const std::string& error);
  void Notify(Entry* e);
  // The registry's thread: dials nodes whose backoff ended, cancels
  // silent streams.
  void Loop();
  // Needs mu_: marks e's call cancelled; returns its context for
  // TryCancel, to be called without mu_ (gRPC may run callbacks inline).
  std::shared_ptr<grpc::ClientContext> Cancel(Entry* e, const std::string& reason);
  std::string Where(const Entry& e) const;

  Options options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;  // wakes the loop, and waits for calls to end
  bool stopped_ = false;
  bool wake_ = false;  // the loop has something to look at now
  std::map<std::string, std::shared_ptr<Entry>> nodes_;
  std::thread loop_;
};

}  // namespace nodevol::nodes
