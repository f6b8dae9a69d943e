#include "backend/volume_root.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "backend/claim_params.h"
#include "base/parse.h"
#include "base/unique_fd.h"

namespace nodevol {

Status ParseVolumeRoot(const std::string& kind, const Params& params, VolumeRoot* out) {
  for (const auto& [k, v] : params) {
    uint64_t n = 0;
    if (k == "mode") {
      NODEVOL_RETURN_IF_ERROR(ParseUint("parameter mode", v, 07777, &n, 8));
      out->mode = static_cast<mode_t>(n);
    } else if (k == "uid") {
      NODEVOL_RETURN_IF_ERROR(ParseUint("parameter uid", v, 0xfffffffe, &n));
      out->uid = static_cast<uid_t>(n);
    } else if (k == "gid") {
      NODEVOL_RETURN_IF_ERROR(ParseUint("parameter gid", v, 0xfffffffe, &n));
      out->gid = static_cast<gid_t>(n);
    } else if (!IsClaimParam(k)) {
      return Status::InvalidArgument("unknown parameter \"" + k + "\" for " + kind + "; known: mode, uid, gid, " +
                                     ClaimParamList());
    } else {
      NODEVOL_RETURN_IF_ERROR(CheckClaimParam(k, v));
    }
  }
  return Status::Ok();
}

Status ApplyVolumeRoot(const std::string& dir, const VolumeRoot& root) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) return Status::FromErrno("open " + dir, errno);
  if (::fchown(fd.get(), root.uid, root.gid) != 0) return Status::FromErrno("chown " + dir, errno);
  if (::fchmod(fd.get(), root.mode) != 0) return Status::FromErrno("chmod " + dir, errno);
  return Status::Ok();
}

}  // namespace nodevol
