// Snapshot records: a volume's content at one instant, kept by the pool
// the volume lives in, from which new volumes are made (restores). Like
// VolumeRecord, what nodevold persists (state/store.h) and what the gRPC
// layer translates.
//
// A snapshot belongs to its pool, not to its source volume: it outlives
// the volume where the backend allows (lvm thin: a thin snapshot shares
// blocks with its origin but does not depend on it), and a volume made
// from it is a volume like any other.
#pragma once

#include <cstdint>
#include <string>

#include "node/volume.h"

namespace nodevol {

struct SnapshotRecord {
  std::string name;
  std::string source;        // the volume it was taken of
  std::string pool;
  std::string backend;       // kind of the pool's backend when taken
  uint64_t size_bytes = 0;   // the source's size then: a restore is at least this big
  std::string fs_type;       // the source's filesystem (a restore keeps it)
  bool block = false;        // the source was a raw block volume
  VolumeState state = VolumeState::kCreating;
  int64_t created_unix = 0;
  Params attributes;         // backend-owned facts: vg, lv, uuid
};

}  // namespace nodevol
