// Placement: which node gets a new volume. Pure: the caller passes what the
// node registry sees (free bytes per node and pool) and the bytes already
// promised to volumes being created (Reservations), and gets a node or a
// Status saying why none fits, naming each node's reason, which becomes the
// claim's ProvisioningFailed event.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "placement/reservations.h"

namespace nodevol::provisioner {

// One pool on one node, as the registry last saw it.
struct PoolSeen {
  std::string node;
  std::string pool;
  std::string backend;
  uint64_t free_bytes = 0;
  bool reachable = false;
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
// room (room = free - reserved); FAILED_PRECONDITION when no reachable,
// allowed node has the pool at all; UNAVAILABLE when the only candidates
// are unreachable. Ties go to the smaller node name, so placement is
// deterministic.
Status Place(const std::vector<PoolSeen>& seen, const PlacementRequest& req, const Reservations& reserved,
             PlacementPolicy policy, std::string* node);

}  // namespace nodevol::provisioner
