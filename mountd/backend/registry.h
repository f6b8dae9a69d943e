// Backend registry: builds a pool's Backend from its configured kind and
// options. New backends (lvm, nfs) register here and nowhere else.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace nodevol {

class Lvm;

// What backends share within one nodevold.
struct BackendEnv {
  std::string state_dir;      // backends keep staging mounts below it
  std::shared_ptr<Lvm> lvm;   // made by the first LVM pool, shared by the others
  // Deadlines of one lvm command and of one mkfs or filesystem grow.
  std::chrono::milliseconds lvm_timeout = std::chrono::minutes(2);
  std::chrono::milliseconds mkfs_timeout = std::chrono::minutes(10);
  // How long work on a pool's disk may go without progress (a dir pool's
  // operations; any pool's fsGroup walk; an LVM volume's staging mount).
  std::chrono::milliseconds dir_io_timeout = std::chrono::seconds(30);
};

// Backend kinds this build knows.
std::vector<std::string> BackendKinds();
// INVALID_ARGUMENT for an unknown kind or a bad option, naming the pool.
// Backends with state need `env` (lvm); dir pools do without.
Status MakeBackend(const std::string& pool, const std::string& kind, const Params& options,
                   std::unique_ptr<Backend>* out, BackendEnv* env = nullptr);

}  // namespace nodevol
