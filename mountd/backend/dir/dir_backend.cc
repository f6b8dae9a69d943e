#include "backend/dir/dir_backend.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

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
// allocation is serialized per filesystem, so a dead disk's stuck quota
// call holds up no pool on another one.
std::mutex& ProjectIdLock(dev_t dev) {
  static std::mutex mu;
  static std::map<dev_t, std::unique_ptr<std::mutex>> locks;
  std::lock_guard<std::mutex> l(mu);
  auto& lock = locks[dev];
  if (!lock) lock = std::make_unique<std::mutex>();
  return *lock;
}

}  // namespace

Status DirBackend::Make(const std::string& pool, const Params& options, std::unique_ptr<Backend>* out,
                        std::chrono::milliseconds io_limit) {
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
  struct stat st;
  if (::stat(resolved.c_str(), &st) != 0) return Status::FromErrno("pool " + pool + ": stat " + resolved, errno);
  out->reset(new DirBackend(Where{pool, resolved, st.st_dev, use_quota}, io_limit));
  return Status::Ok();
}

DirBackend::DirBackend(Where where, std::chrono::milliseconds io_limit)
    : where_(std::move(where)), gate_(where_.pool, where_.path, io_limit) {}

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
  auto attributes = std::make_shared<Params>(record->attributes);
  NODEVOL_RETURN_IF_ERROR(gate_.Run(
      "the create of volume " + record->spec.name,
      [w = where_, name = record->spec.name, root, bytes = record->spec.size_bytes, attributes](const Step& step) {
        return MakeVolumeDir(w, name, root, bytes, attributes.get(), step);
      }));
  record->attributes = *attributes;
  return Status::Ok();
}

Status DirBackend::MakeVolumeDir(const Where& w, const std::string& name, const VolumeRoot& root, uint64_t bytes,
                                 Params* attributes, const Step& step) {
  std::string dir = w.VolumeDir(name);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    // Out of blocks or inodes with figures that said there was room: no
    // room all the same, and nothing made, so the caller may go elsewhere.
    if (errno == ENOSPC || errno == EDQUOT)
      return Status::ResourceExhausted("pool " + w.pool + " has no room for a new directory (mkdir " + dir + ": " +
                                       std::strerror(errno) + "; out of blocks or inodes)");
    return Status::FromErrno("mkdir " + dir, errno);
  }
  step();
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) return Status::FromErrno("stat " + dir, errno);
  if (!S_ISDIR(st.st_mode)) return Status::FailedPrecondition(dir + " exists and is not a directory");
  NODEVOL_RETURN_IF_ERROR(ApplyVolumeRoot(dir, root));
  (*attributes)["path"] = dir;
  if (w.quota) NODEVOL_RETURN_IF_ERROR(ApplyQuota(w, dir, bytes, attributes));
  step();
  // The ready record written next must not outlive, through a power loss,
  // the directory it names (the pool and the state directory are often
  // different filesystems): its owner, mode and name on disk first.
  NODEVOL_RETURN_IF_ERROR(FsyncDir(dir));
  step();
  return FsyncDir(w.path);
}

Status DirBackend::ApplyQuota(const Where& w, const std::string& dir, uint64_t bytes, Params* attributes) {
  std::lock_guard<std::mutex> lock(ProjectIdLock(w.dev));
  uint32_t id = 0;
  NODEVOL_RETURN_IF_ERROR(GetProjectId(dir, &id));
  if (id < kFirstProjectId) {
    // Pick one above every id the pool's directories use, then skip ids
    // something else on the filesystem is charged to (another pool's
    // volumes, an operator's projects).
    id = kFirstProjectId;
    DIR* d = ::opendir(w.path.c_str());
    if (!d) return Status::FromErrno("opendir " + w.path, errno);
    while (struct dirent* e = ::readdir(d)) {
      uint32_t used = 0;
      if (e->d_name[0] != '.' && GetProjectId(w.path + "/" + e->d_name, &used).ok() && used >= id) id = used + 1;
    }
    ::closedir(d);
    for (;;) {
      bool in_use = false;
      NODEVOL_RETURN_IF_ERROR(ProjectIdInUse(w.path, id, &in_use));
      if (!in_use) break;
      if (id == UINT32_MAX) return Status::ResourceExhausted("no free project id on the filesystem of " + w.path);
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
  return gate_.Run("the delete of volume " + record.spec.name,
                   [w = where_, name = record.spec.name](const Step& step) { return RemoveVolumeDir(w, name, step); });
}

Status DirBackend::RemoveVolumeDir(const Where& w, const std::string& name, const Step& step) {
  // Rename first: a crash mid-removal leaves a ".deleting-" tree that the
  // next Delete finishes, never a half-emptied volume under its own name.
  std::string dir = w.VolumeDir(name);
  std::string doomed = w.path + "/" + kDeletingPrefix + name;
  NODEVOL_RETURN_IF_ERROR(CheckNoMountsIn({dir, doomed}));
  // A copy CreateFrom had not finished.
  NODEVOL_RETURN_IF_ERROR(RemoveTree(w.path, kMakingPrefix + name, step));
  if (::rename(dir.c_str(), doomed.c_str()) != 0 && errno != ENOENT)
    return Status::FromErrno("rename " + dir, errno);
  step();
  return RemoveTree(w.path, kDeletingPrefix + name, step);
}

Status DirBackend::Expand(VolumeRecord* record, uint64_t new_size) {
  if (!quota_) return Status::Ok();
  auto attributes = std::make_shared<Params>(record->attributes);
  NODEVOL_RETURN_IF_ERROR(gate_.Run("the expansion of volume " + record->spec.name,
                                    [w = where_, dir = VolumeDir(record->spec.name), new_size,
                                     attributes](const Step&) { return ApplyQuota(w, dir, new_size, attributes.get()); }));
  record->attributes = *attributes;
  return Status::Ok();
}

Status DirBackend::Stage(const VolumeRecord& record, std::string* path) {
  NODEVOL_RETURN_IF_ERROR(gate_.Check());
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
  out->free_bytes -= std::min(out->free_bytes, copies_.promised());
  return Status::Ok();
}

}  // namespace nodevol
