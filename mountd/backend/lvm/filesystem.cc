#include "backend/lvm/filesystem.h"

#include <unistd.h>

#include <chrono>
#include <map>

#include "backend/lvm/blkid.h"
#include "process/run.h"

namespace nodevol {
namespace {

const std::map<std::string, std::string> kPackageOf = {
    {"mkfs.ext4", "e2fsprogs"}, {"resize2fs", "e2fsprogs"}, {"mkfs.xfs", "xfsprogs"},
    {"xfs_growfs", "xfsprogs"}, {"lvm", "lvm2"}};

Status RunTool(const std::string& tool, std::vector<std::string> args, std::chrono::milliseconds timeout) {
  std::string path;
  NODEVOL_RETURN_IF_ERROR(FindTool(tool, &path));
  args.insert(args.begin(), path);
  RunOptions o;
  o.timeout = timeout;
  RunResult r;
  return RunChecked(args, o, &r);
}

}  // namespace

Status FindTool(const std::string& name, std::string* path) {
  for (const char* dir : {"/usr/sbin", "/sbin", "/usr/bin", "/bin"}) {
    std::string p = std::string(dir) + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) {
      *path = p;
      return Status::Ok();
    }
  }
  auto it = kPackageOf.find(name);
  return Status::FailedPrecondition(name + " is not installed" +
                                    (it == kPackageOf.end() ? "" : "; install the " + it->second + " package"));
}

Status CheckFsTools(const std::string& fs) {
  std::string path;
  if (fs == "ext4") {
    NODEVOL_RETURN_IF_ERROR(FindTool("mkfs.ext4", &path));
    return FindTool("resize2fs", &path);
  }
  if (fs == "xfs") {
    NODEVOL_RETURN_IF_ERROR(FindTool("mkfs.xfs", &path));
    return FindTool("xfs_growfs", &path);
  }
  return Status::InvalidArgument("unknown filesystem " + fs);
}

Status MakeFs(const std::string& fs, const std::string& device, std::chrono::milliseconds timeout) {
  if (fs == "ext4")
    return RunTool("mkfs.ext4", {"-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", device},
                   timeout);
  if (fs == "xfs") return RunTool("mkfs.xfs", {"-q", "-f", "-K", device}, timeout);
  return Status::InvalidArgument("unknown filesystem " + fs);
}

Status GrowFs(const std::string& fs, const std::string& device, const std::string& mountpoint,
              std::chrono::milliseconds timeout) {
  if (fs == "ext4") return RunTool("resize2fs", {device}, timeout);
  if (fs == "xfs") return RunTool("xfs_growfs", {mountpoint}, timeout);
  return Status::InvalidArgument("unknown filesystem " + fs);
}

Status ProbeFsType(const std::string& device, std::string* fs) {
  fs->clear();
  BlkidFindings b;
  NODEVOL_RETURN_IF_ERROR(ProbeBlkid(device, &b));
  if (b.conflicting) return Status::FailedPrecondition(device + " carries more than one signature");
  *fs = b.type;
  return Status::Ok();
}

}  // namespace nodevol
