#include "backend/registry.h"

#include "backend/dir/dir_backend.h"

namespace nodevol {

std::vector<std::string> BackendKinds() { return {"dir"}; }

Status MakeBackend(const std::string& pool, const std::string& kind, const Params& options,
                   std::unique_ptr<Backend>* out) {
  if (kind == "dir") return DirBackend::Make(pool, options, out);
  return Status::InvalidArgument("pool " + pool + ": unknown backend \"" + kind + "\"; this nodevold knows: dir");
}

}  // namespace nodevol
