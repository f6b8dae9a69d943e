// Seen(): a PoolSeen for the tests, its figures named in the order the
// registry fills them, every other field (sample, shared_by) default.
#pragma once

#include <string>

#include "placement/placement.h"

namespace nodevol::provisioner {

inline PoolSeen Seen(const std::string& node, const std::string& pool, const std::string& backend,
                     uint64_t free_bytes, bool reachable, uint64_t total_bytes = 0, uint64_t allocated_bytes = 0,
                     bool size_enforced = true) {
  PoolSeen p;
  p.node = node;
  p.pool = pool;
  p.backend = backend;
  p.free_bytes = free_bytes;
  p.reachable = reachable;
  p.total_bytes = total_bytes;
  p.allocated_bytes = allocated_bytes;
  p.size_enforced = size_enforced;
  return p;
}

}  // namespace nodevol::provisioner
