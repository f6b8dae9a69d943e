// Backend registry: builds a pool's Backend from its configured kind and
// options. New backends (lvm, nfs) register here and nowhere else.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace nodevol {

// Backend kinds this build knows.
std::vector<std::string> BackendKinds();
// INVALID_ARGUMENT for an unknown kind or a bad option, naming the pool.
Status MakeBackend(const std::string& pool, const std::string& kind, const Params& options,
                   std::unique_ptr<Backend>* out);

}  // namespace nodevol
