// DirBackend: snapshots, and volumes made from snapshots or volumes.
//
// A directory has no point-in-time image: a snapshot is a copy of the
// volume's tree (fs/tree_copy.h: reflinks where the filesystem shares
// blocks, else bytes), taken file by file while pods may write, so a file
// changed during the copy is caught before or after that change, not at
// one instant with the rest (docs/snapshots.md). A restore or clone is a
// copy of the snapshot or the volume into the new volume's directory,
// charged to the new volume's project quota from its first byte.
//
// Crash safety: a copy is made under a ".making-" name and renamed to its
// own name only once complete and synced, so a name always holds a whole
// copy. A retried create removes a ".making-" leftover and copies again;
// a create that finds the final name taken by a directory it cannot have
// made (no record of an unfinished create) refuses and leaves it.
#include <fcntl.h>
#include <linux/capability.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "backend/dir/dir_backend.h"
#include "backend/dir/remove_tree.h"
#include "base/unique_fd.h"
#include "fs/tree_copy.h"
#include "process/without_capability.h"

namespace nodevol {
namespace {

// OK when path is a directory (not a symlink to one); NOT_FOUND when
// missing.
Status IsDir(const std::string& path, const std::string& what) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::NotFound("directory " + path + " of " + what + " is missing");
    return Status::FromErrno("stat " + path, errno);
  }
  if (!S_ISDIR(st.st_mode)) return Status::FailedPrecondition(path + " of " + what + " is not a directory");
  return Status::Ok();
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 || errno != ENOENT;
}

}  // namespace

Status DirBackend::CopyInto(const std::string& src, const std::string& parent, const std::string& name,
                            uint64_t limit, Params* attributes) {
  const std::string making = kMakingPrefix + name;
  NODEVOL_RETURN_IF_ERROR(RemoveTree(parent, making).WithContext("a copy left by an earlier try"));
  UniqueFd in(::open(src.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (in.get() < 0) return Status::FromErrno("open " + src, errno);
  // Before the first byte: what the copy will write, against what it may
  // write and what the pool can give it. (Before, a snapshot compared the
  // source's quota usage, where a hard-linked file counts once, with the
  // free space, which concurrent snapshots all passed at once; a restore
  // or clone was not checked at all.)
  TreeSize need;
  NODEVOL_RETURN_IF_ERROR(MeasureTree(in.get(), &need).WithContext("measure " + src));
  if (quota_ && need.bytes > limit)
    return Status::ResourceExhausted(src + " takes " + std::to_string(need.bytes) + " bytes as a copy (hard links are " +
                                     "copied as separate files), more than the " + std::to_string(limit) +
                                     " bytes the copy is limited to");
  struct statvfs vfs;
  if (::statvfs(path_.c_str(), &vfs) != 0) return Status::FromErrno("statvfs " + path_, errno);
  TreeSize free;
  free.bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  // f_files 0: a filesystem that does not count inodes.
  if (vfs.f_files != 0) free.entries = vfs.f_favail;
  CopySpace::Hold promised;
  NODEVOL_RETURN_IF_ERROR(copies_.Reserve(need, free, src, pool_, &promised));
  UniqueFd parent_fd(::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (parent_fd.get() < 0) return Status::FromErrno("open " + parent, errno);
  if (::mkdirat(parent_fd.get(), making.c_str(), 0700) != 0)
    return Status::FromErrno("mkdir " + parent + "/" + making, errno);
  // Before the first byte: everything made below inherits the project.
  if (quota_) NODEVOL_RETURN_IF_ERROR(ApplyQuota(parent + "/" + making, limit, attributes));
  UniqueFd out(::openat(parent_fd.get(), making.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (out.get() < 0) return Status::FromErrno("open " + parent + "/" + making, errno);
  TreeCopyStats stats;
  // Held to what was measured and promised: a pod writing meanwhile
  // makes the copy fail (ABORTED), not larger.
  Status st = RunWithoutCapability(CAP_SYS_RESOURCE, [&] { return CopyTree(in.get(), out.get(), &stats, need); });
  if (st.code() == Status::Code::kResourceExhausted) {
    // xfs says ENOSPC for a project's limit as for a full filesystem: say
    // both figures.
    std::string now = ::statvfs(path_.c_str(), &vfs) == 0
                          ? std::to_string(static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize)
                          : std::string("unknown");
    st = Status::ResourceExhausted(st.message() + (quota_ ? "; the copy is limited to " + std::to_string(limit) +
                                                                " bytes (hard links are copied as separate files)"
                                                          : std::string()) +
                                   "; pool " + pool_ + "'s filesystem has " + now + " bytes free now");
  }
  NODEVOL_RETURN_IF_ERROR(st.WithContext("copy " + src));
  // The data reaches the disk before the name says the copy is whole.
  if (::syncfs(out.get()) != 0) return Status::FromErrno("syncfs " + parent, errno);
  if (::renameat2(parent_fd.get(), making.c_str(), parent_fd.get(), name.c_str(), RENAME_NOREPLACE) != 0)
    return Status::FromErrno("rename " + parent + "/" + making + " to " + name, errno);
  if (::fsync(parent_fd.get()) != 0) return Status::FromErrno("fsync " + parent, errno);
  spdlog::info("pool {}: copied {} to {}/{}: {} files ({} bytes, {} reflinked), {} directories, {} symlinks, "
               "{} left out (devices, sockets, mounts)",
               pool_, src, parent, name, stats.files, stats.bytes, stats.reflinked, stats.dirs, stats.symlinks,
               stats.left_out);
  return Status::Ok();
}

Status DirBackend::CreateSnapshot(const VolumeRecord& source, SnapshotRecord* snapshot, bool resumed) {
  NODEVOL_RETURN_IF_ERROR(gate_.Check());
  const std::string& name = snapshot->name;
  const std::string dir = SnapshotsDir();
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return Status::FromErrno("mkdir " + dir, errno);
  NODEVOL_RETURN_IF_ERROR(IsDir(dir, "pool " + pool_ + "'s snapshots"));
  const std::string path = dir + "/" + name;
  Params attributes{{"path", path}};
  if (Exists(path)) {
    // Only a retried create may take a copy it finds: its rename was the
    // last step before the crash.
    if (!resumed || snapshot->state != VolumeState::kCreating) {
      snapshot->attributes[kFoundNotMade] = "";
      return Status::FailedPrecondition(path + " of snapshot " + name +
                                        " already exists and no record says this create made it; remove it if it "
                                        "is not needed");
    }
    NODEVOL_RETURN_IF_ERROR(IsDir(path, "snapshot " + name));
    if (quota_) NODEVOL_RETURN_IF_ERROR(ApplyQuota(path, source.spec.size_bytes, &attributes));
  } else {
    NODEVOL_RETURN_IF_ERROR(Check(source));
    // A copy that fills the filesystem fails every other volume's writes
    // meanwhile: CopyInto refuses one that does not fit.
    NODEVOL_RETURN_IF_ERROR(CopyInto(VolumeDir(source.spec.name), dir, name, source.spec.size_bytes, &attributes));
  }
  snapshot->attributes = std::move(attributes);
  spdlog::info("pool {}: snapshot {} of volume {} is the copy {}", pool_, name, source.spec.name, path);
  return Status::Ok();
}

Status DirBackend::DeleteSnapshot(const SnapshotRecord& snapshot) {
  NODEVOL_RETURN_IF_ERROR(gate_.Check());
  const std::string& name = snapshot.name;
  const std::string dir = SnapshotsDir();
  if (snapshot.attributes.count(kFoundNotMade)) {
    spdlog::warn("pool {}: snapshot {} never became ready; {}/{} is not its create's work and is left alone", pool_,
                 name, dir, name);
    return Status::Ok();
  }
  if (!Exists(dir)) return Status::Ok();
  // As for volumes: renamed first, so a crash mid-removal never leaves a
  // half-emptied snapshot under its name.
  NODEVOL_RETURN_IF_ERROR(RemoveTree(dir, kMakingPrefix + name));
  const std::string doomed = kDeletingPrefix + name;
  if (::rename((dir + "/" + name).c_str(), (dir + "/" + doomed).c_str()) != 0 && errno != ENOENT)
    return Status::FromErrno("rename " + dir + "/" + name, errno);
  NODEVOL_RETURN_IF_ERROR(RemoveTree(dir, doomed));
  spdlog::info("pool {}: removed the copy {}/{} of snapshot {}", pool_, dir, name, name);
  return Status::Ok();
}

Status DirBackend::CheckSnapshot(const SnapshotRecord& snapshot) {
  return IsDir(SnapshotsDir() + "/" + snapshot.name, "snapshot " + snapshot.name);
}

Status DirBackend::CreateFrom(VolumeRecord* record, const SnapshotRecord* snapshot, const VolumeRecord* volume,
                              bool resumed) {
  NODEVOL_RETURN_IF_ERROR(gate_.Check());
  const std::string& name = record->spec.name;
  const std::string path = VolumeDir(name);
  const std::string what = snapshot ? "snapshot " + snapshot->name : "volume " + volume->spec.name;
  Params attributes{{"path", path}};
  if (Exists(path)) {
    if (!resumed || record->state != VolumeState::kCreating) {
      record->attributes[kFoundNotMade] = "";
      return Status::FailedPrecondition(path + " already exists and no record says this create made it; rename "
                                        "or remove it, nodevold will not touch it");
    }
    NODEVOL_RETURN_IF_ERROR(IsDir(path, "volume " + name));
    if (quota_) NODEVOL_RETURN_IF_ERROR(ApplyQuota(path, record->spec.size_bytes, &attributes));
  } else {
    const std::string src = snapshot ? SnapshotsDir() + "/" + snapshot->name : VolumeDir(volume->spec.name);
    NODEVOL_RETURN_IF_ERROR(snapshot ? CheckSnapshot(*snapshot) : Check(*volume));
    NODEVOL_RETURN_IF_ERROR(CopyInto(src, path_, name, record->spec.size_bytes, &attributes));
  }
  record->attributes = std::move(attributes);
  spdlog::info("pool {}: volume {} is a copy of {}", pool_, name, what);
  return Status::Ok();
}

}  // namespace nodevol
