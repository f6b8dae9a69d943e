#include "backend/registry.h"

#include <unistd.h>

#include <algorithm>

#include "backend/dir/dir_backend.h"
#include "backend/lvm/filesystem.h"
#include "backend/lvm/lvm.h"
#include "backend/lvm/lvm_backend.h"
#include "backend/lvm/lvm_probe.h"
#include "backend/nfs/nfs_backend.h"

namespace nodevol {

std::vector<std::string> BackendKinds() { return {"dir", "lvm", "nfs"}; }

namespace {

Status MakeOfKind(const std::string& pool, const std::string& kind, const Params& options,
                  std::unique_ptr<Backend>* out, BackendEnv* env) {
  if (kind == "dir")
    return DirBackend::Make(pool, options, out, env ? env->dir_io_timeout : DirBackend::kDefaultIoLimit);
  if (kind == "lvm") {
    if (!env) return Status::Internal("pool " + pool + ": lvm pools need the daemon's environment");
    if (!env->lvm) {
      std::string binary;
      NODEVOL_RETURN_IF_ERROR(FindTool("lvm", &binary).WithContext("pool " + pool));
      // Without udevd (containers, minimal guests) lvm must not wait for it.
      bool udev = ::access("/run/udev/control", F_OK) == 0;
      // A stamp is a sector per PV: one that takes seconds is a disk that
      // stopped answering.
      auto probe = MakeBoundedLvmProbe(MakeLvmProbe(), std::min<std::chrono::milliseconds>(env->lvm_timeout,
                                                                                         std::chrono::seconds(5)));
      env->lvm = std::make_shared<Lvm>(binary, udev, Lvm::Runner{}, probe);
      env->lvm->set_timeout(env->lvm_timeout);
      env->lvm->RememberPvsIn(env->state_dir + "/lvm");
    }
    return LvmBackend::Make(pool, options, env->state_dir, env->lvm, out, env->mkfs_timeout, env->dir_io_timeout);
  }
  if (kind == "nfs") {
    if (!env) return Status::Internal("pool " + pool + ": nfs pools need the daemon's environment");
    return NfsBackend::Make(pool, options, env->state_dir, out);
  }
  return Status::InvalidArgument("pool " + pool + ": unknown backend \"" + kind + "\"; this nodevold knows: dir, lvm, nfs");
}

}  // namespace

// Options every kind of pool takes are taken out here; the rest go to the
// backend.
Status MakeBackend(const std::string& pool, const std::string& kind, const Params& options,
                   std::unique_ptr<Backend>* out, BackendEnv* env) {
  Params own = options;
  bool allow_suid_dev = false;
  if (auto it = own.find("allow-suid-dev"); it != own.end()) {
    if (it->second != "yes" && it->second != "no")
      return Status::InvalidArgument("pool " + pool + ": allow-suid-dev must be yes or no, not \"" + it->second + "\"");
    allow_suid_dev = it->second == "yes";
    own.erase(it);
  }
  NODEVOL_RETURN_IF_ERROR(MakeOfKind(pool, kind, own, out, env));
  (*out)->set_allow_suid_dev(allow_suid_dev);
  return Status::Ok();
}

}  // namespace nodevol
