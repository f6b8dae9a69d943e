#include "backend/dir/dir_backend.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "backend/dir/project_quota.h"
#include "backend/dir/remove_tree.h"
#include "backend/volume_root.h"
#include "mount/target.h"
#include "base/atomic_file.h"

namespace nodevol {
namespace {

// Project ids nodevold hands out start here, clear of ids operators
// usually pick by hand in /etc/projid.
constexpr uint32_t kFirstProjectId = 1000000;
// Project ids are per filesystem, and several pools may share one: id
// allocation is serialized across all dir pools of the process.
std::mutex project_id_mu;

}  // namespace

Status DirBackend::Make(const std::string& pool, const Params& options, std::unique_ptr<Backend>* out) {
  std::string path, quota = "auto";
  for (const auto& [k, v] : options) {
    if (k == "path") path = v;
    else if (k == "quota") quota = v;
    else return Status::InvalidArgument("pool " + pool + ": unknown dir option \"" + k + "\"; known: path, quota");
  }
  if (path.empty()) return Status::InvalidArgument("pool " + pool + ": dir pools need path=<directory>");
  if (quota != "auto" && quota != "off" && quota != "required")
    return Status::InvalidArgument("pool " + pool + ": quota must be auto, off or required, not \"" + quota + "\"");
  std::string resolved;
  NODEVOL_RETURN_IF_ERROR(ResolveConfiguredDir("pool " + pool + " path", path, &resolved));
  bool use_quota = false;
  if (quota != "off") {
    Status probe = ProbeProjectQuota(resolved);
    if (!probe.ok() && quota == "required") return probe.WithContext("pool " + pool);
    use_quota = probe.ok();
  }
  out->reset(new DirBackend(pool, resolved, use_quota));
  return Status::Ok();
}

DirBackend::DirBackend(std::string pool, std::string path, bool quota)
    : pool_(std::move(pool)), path_(std::move(path)), quota_(quota) {}

Params DirBackend::attributes() const {
  return {{"path", path_}, {"quota", quota_ ? "project" : "none"}};
}

Status DirBackend::Validate(const VolumeSpec& spec) const {
  if (!spec.fs_type.empty())
    return Status::InvalidArgument("dir pool " + pool_ + " has no filesystem types; leave fs_type empty, not \"" +
                                   spec.fs_type + "\"");
  VolumeRoot root;
  return ParseVolumeRoot("a dir volume", spec.parameters, &root);
}

Status DirBackend::Create(VolumeRecord* record) {
  VolumeRoot root;
  NODEVOL_RETURN_IF_ERROR(ParseVolumeRoot("a dir volume", record->spec.parameters, &root));
  std::string dir = VolumeDir(record->spec.name);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    // Out of blocks or inodes with figures that said there was room: no
    // room all the same, and nothing made, so the caller may go elsewhere.
    if (errno == ENOSPC || errno == EDQUOT)
      return Status::ResourceExhausted("pool " + pool_ + " has no room for a new directory (mkdir " + dir + ": " +
                                       std::strerror(errno) + "; out of blocks or inodes)");
    return Status::FromErrno("mkdir " + dir, errno);
  }
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) return Status::FromErrno("stat " + dir, errno);
  if (!S_ISDIR(st.st_mode)) return Status::FailedPrecondition(dir + " exists and is not a directory");
  NODEVOL_RETURN_IF_ERROR(ApplyVolumeRoot(dir, root));
  record->attributes["path"] = dir;
  if (quota_) NODEVOL_RETURN_IF_ERROR(ApplyQuota(dir, record->spec.size_bytes, &record->attributes));
  // The ready record written next must not outlive, through a power loss,
  // the directory it names (the pool and the state directory are often
  // different filesystems): its owner, mode and name on disk first.
  NODEVOL_RETURN_IF_ERROR(FsyncDir(dir));
  return FsyncDir(path_);
}

Status DirBackend::ApplyQuota(const std::string& dir, uint64_t bytes, Params* attributes) {
  std::lock_guard<std::mutex> lock(project_id_mu);
  uint32_t id = 0;
  NODEVOL_RETURN_IF_ERROR(GetProjectId(dir, &id));
  if (id < kFirstProjectId) {
    // Pick one above every id the pool's directories use, then skip ids
    // something else on the filesystem is charged to (another pool's
    // volumes, an operator's projects).
    id = kFirstProjectId;
    DIR* d = ::opendir(path_.c_str());
    if (!d) return Status::FromErrno("opendir " + path_, errno);
    while (struct dirent* e = ::readdir(d)) {
      uint32_t used = 0;
      if (e->d_name[0] != '.' && GetProjectId(path_ + "/" + e->d_name, &used).ok() && used >= id) id = used + 1;
    }
    ::closedir(d);
    for (;;) {
      bool in_use = false;
      NODEVOL_RETURN_IF_ERROR(ProjectIdInUse(path_, id, &in_use));
      if (!in_use) break;
      if (id == UINT32_MAX) return Status::ResourceExhausted("no free project id on the filesystem of " + path_);
      ++id;
    }
    NODEVOL_RETURN_IF_ERROR(SetProjectId(dir, id));
  }
  NODEVOL_RETURN_IF_ERROR(SetProjectLimit(dir, id, bytes));
  (*attributes)["project_id"] = std::to_string(id);
  return Status::Ok();
}

Status DirBackend::Delete(const VolumeRecord& record) {
  // A directory CreateFrom found and refused is someone's data.
  if (record.attributes.count(kFoundNotMade)) return Status::Ok();
  // Rename first: a crash mid-removal leaves a ".deleting-" tree that the
  // next Delete finishes, never a half-emptied volume under its own name.
  std::string dir = VolumeDir(record.spec.name);
  std::string doomed = path_ + "/" + kDeletingPrefix + record.spec.name;
  NODEVOL_RETURN_IF_ERROR(CheckNoMountsIn({dir, doomed}));
  // A copy CreateFrom had not finished.
  NODEVOL_RETURN_IF_ERROR(RemoveTree(path_, kMakingPrefix + record.spec.name));
  if (::rename(dir.c_str(), doomed.c_str()) != 0 && errno != ENOENT)
    return Status::FromErrno("rename " + dir, errno);
  return RemoveTree(path_, kDeletingPrefix + record.spec.name);
}

Status DirBackend::Expand(VolumeRecord* record, uint64_t new_size) {
  if (quota_) return ApplyQuota(VolumeDir(record->spec.name), new_size, &record->attributes);
  return Status::Ok();
}

Status DirBackend::Stage(const VolumeRecord& record, std::string* path) {
  *path = VolumeDir(record.spec.name);
  return Check(record);
}

Status DirBackend::Check(const VolumeRecord& record) {
  std::string dir = VolumeDir(record.spec.name);
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::NotFound("directory " + dir + " of volume " + record.spec.name + " is missing");
    return Status::FromErrno("stat " + dir, errno);
  }
  if (!S_ISDIR(st.st_mode)) return Status::FailedPrecondition(dir + " is not a directory");
  return Status::Ok();
}

Status DirBackend::GetCapacity(Capacity* out) {
  struct statvfs vfs;
  if (::statvfs(path_.c_str(), &vfs) != 0) return Status::FromErrno("statvfs " + path_, errno);
  out->total_bytes = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
  out->free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  return Status::Ok();
}

}  // namespace nodevol
