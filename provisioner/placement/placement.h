// Placement: which node gets a new volume. Pure: the caller passes each
// node's pools with their room (capacity/ledger.h: what nodevold reported
// minus what is promised), and gets a node or a Status saying why none
// fits, naming each node's reason, which becomes the claim's
// ProvisioningFailed event.
#pragma once

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"

namespace nodevol::provisioner {

// One pool on one node, as the registry last saw it.
struct PoolSeen {
  std::string node;
  std::string pool;
  std::string backend;
  uint64_t free_bytes = 0;
  bool reachable = false;
  uint64_t total_bytes = 0;
  uint64_t allocated_bytes = 0;  // sum of its volumes' sizes
  bool size_enforced = true;
  // When these figures last changed (steady clock): a report newer than a
  // finished create includes its volume.
  std::chrono::steady_clock::time_point figures_at{};
  // nodevold's capacity sample these figures come from (0: not told).
  uint64_t sample = 0;
  // Storage several nodes share (an NFS pool's export): the same text on
  // every node serving it, so a promise there counts on all of them; ""
  // for a node's own storage.
  std::string shared_by = {};
};

// A pool and its room for one more volume.
struct PoolRoom {
  PoolSeen seen;
  uint64_t base = 0;      // what the pool can give before promises
  uint64_t promised = 0;  // bytes promised there and not yet in a report
  uint64_t room() const { return base > promised ? base - promised : 0; }
};

enum class PlacementPolicy {
  kMostFree,  // spread: the node with the most room left (default)
  kBinpack,   // fill: the node with the least room that still fits
};

// "most-free" | "binpack"; INVALID_ARGUMENT otherwise.
Status ParsePlacementPolicy(const std::string& text, PlacementPolicy* out);

struct PlacementRequest {
  std::string pool;
  std::string backend;  // "" = any kind
  uint64_t bytes = 0;
  // Nodes allowed by the class's allowedTopologies (and, for
  // WaitForFirstConsumer, exactly the selected node); empty = all nodes.
  std::set<std::string> allowed_nodes;
  bool restrict_nodes = false;  // true: only allowed_nodes, even if empty
};

// OK and *node; RESOURCE_EXHAUSTED when nodes have the pool but none has
// room; FAILED_PRECONDITION when no reachable,
// allowed node has the pool at all; UNAVAILABLE when the only candidates
// are unreachable. Ties go to the smaller node name, so placement is
// deterministic.
Status Place(const std::vector<PoolRoom>& rooms, const PlacementRequest& req, PlacementPolicy policy,
             std::string* node);

}  // namespace nodevol::provisioner
