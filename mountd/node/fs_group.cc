#include "node/fs_group.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "base/unique_fd.h"
#include "fs/open_untrusted.h"
#include "fs/tree_walk.h"

namespace nodevol {
namespace {

mode_t WantedMode(const struct stat& st) {
  mode_t mode = (st.st_mode & 07777) | S_IRGRP | S_IWGRP;
  if (S_ISDIR(st.st_mode)) mode |= S_ISGID | S_IXGRP | S_IXUSR;
  return mode;
}

// Group and mode of a directory open at fd.
Status FixDir(int fd, const struct stat& st, gid_t gid) {
  if (st.st_gid != gid && ::fchown(fd, static_cast<uid_t>(-1), gid) != 0) return Status::FromErrno("fchown", errno);
  // chown clears setgid on some filesystems: always set the mode after it.
  if (::fchmod(fd, WantedMode(st)) != 0) return Status::FromErrno("fchmod", errno);
  return Status::Ok();
}

// Group and mode of a non-directory entry `name` of the directory dir.
// Opened with O_PATH|O_NOFOLLOW (no open of a device or FIFO, a symlink
// is the link itself), checked to be on the volume's mount and still not
// a directory, then changed through that descriptor.
Status FixEntry(int dir, const char* name, gid_t gid, uint64_t mnt) {
  UniqueFd fd;
  struct stat st;
  Status opened = OpenPathNoFollow(dir, name, &fd, &st);
  if (opened.code() == Status::Code::kNotFound) return Status::Ok();
  NODEVOL_RETURN_IF_ERROR(opened);
  uint64_t on = 0;
  NODEVOL_RETURN_IF_ERROR(MountIdOf(fd.get(), &on));
  if (on != mnt || S_ISDIR(st.st_mode)) return Status::Ok();  // a mount point, or swapped since the walk saw it
  if (st.st_gid != gid && ::fchownat(fd.get(), "", static_cast<uid_t>(-1), gid, AT_EMPTY_PATH) != 0)
    return Status::FromErrno(std::string("chown \"") + name + "\"", errno);
  if (S_ISLNK(st.st_mode)) return Status::Ok();  // symlinks have no mode of their own
  // chmod through the descriptor's /proc link: that reaches exactly the
  // inode opened above (fchmod cannot take an O_PATH descriptor).
  std::string self = "/proc/self/fd/" + std::to_string(fd.get());
  if (::chmod(self.c_str(), WantedMode(st)) != 0) return Status::FromErrno(std::string("chmod \"") + name + "\"", errno);
  return Status::Ok();
}

}  // namespace

Status ApplyFsGroup(const std::string& root, gid_t gid, const Step& step) {
  const std::string what = "apply fsGroup " + std::to_string(gid) + " to " + root;
  UniqueFd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) return Status::FromErrno("open " + root, errno);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrno("stat " + root, errno);
  if (st.st_gid == gid && (st.st_mode & S_ISGID)) return Status::Ok();
  uint64_t mnt = 0;
  NODEVOL_RETURN_IF_ERROR(MountIdOf(fd.get(), &mnt).WithContext(what));
  TreeWalkOps ops;
  ops.on_entry = [&](int dir, const char* name, const struct stat&) {
    Status st = FixEntry(dir, name, gid, mnt);
    if (step) step();
    return st;
  };
  ops.on_dir_done = [&](int dir, const struct stat& s) {
    Status st = FixDir(dir, s, gid);
    if (step) step();
    return st;
  };
  return WalkTree(fd.get(), ops).WithContext(what);
}

}  // namespace nodevol
