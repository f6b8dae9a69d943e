#include "fs/tree_walk.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace nodevol {
namespace {

// A directory the walk went down from: which one it was, and where to
// resume reading it.
struct Level {
  dev_t dev;
  ino_t ino;
  long cookie;        // telldir() just after the child's entry
  bool seen;          // entries met in the current pass (rescan)
  std::string child;  // the subdirectory the walk went into
};

class DirStream {
 public:
  ~DirStream() { reset(nullptr); }
  void reset(DIR* d) {
    if (d_) ::closedir(d_);
    d_ = d;
  }
  DIR* get() const { return d_; }
  int fd() const { return ::dirfd(d_); }

 private:
  DIR* d_ = nullptr;
};

std::string Where(const char* name, size_t depth) {
  return "\"" + std::string(name) + "\" at depth " + std::to_string(depth);
}

// Opens a fresh stream on the open directory fd (taking it).
Status Open(int fd, DirStream* out, struct stat* st) {
  if (::fstat(fd, st) != 0) {
    int err = errno;
    ::close(fd);
    return Status::FromErrno("fstat", err);
  }
  DIR* d = ::fdopendir(fd);
  if (!d) {
    int err = errno;
    ::close(fd);
    return Status::FromErrno("fdopendir", err);
  }
  out->reset(d);
  return Status::Ok();
}

}  // namespace

Status MountIdOf(int fd, uint64_t* id) {
  struct statx stx;
  if (::statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MNT_ID, &stx) != 0)
    return Status::FromErrno("statx", errno);
  // Kernels before 5.8 have no mount id: the device is the next best thing.
  *id = (stx.stx_mask & STATX_MNT_ID) ? stx.stx_mnt_id
                                      : (uint64_t{1} << 63) | makedev(stx.stx_dev_major, stx.stx_dev_minor);
  return Status::Ok();
}

Status WalkTree(int root_fd, const TreeWalkOps& ops) {
  uint64_t root_mnt = 0;
  NODEVOL_RETURN_IF_ERROR(MountIdOf(root_fd, &root_mnt));
  // A description of its own: reading must not move the caller's offset.
  int fd = ::openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("open tree root", errno);
  DirStream d;
  struct stat cur;  // the directory being read
  NODEVOL_RETURN_IF_ERROR(Open(fd, &d, &cur));
  std::vector<Level> stack;
  bool seen = false;
  for (;;) {
    errno = 0;
    struct dirent* e = ::readdir(d.get());
    if (!e) {
      if (errno) return Status::FromErrno("readdir at depth " + std::to_string(stack.size()), errno);
      if (ops.rescan_after_removal && seen) {
        ::rewinddir(d.get());
        seen = false;
        continue;
      }
      if (ops.on_dir_done) NODEVOL_RETURN_IF_ERROR(ops.on_dir_done(d.fd(), cur));
      if (stack.empty()) return Status::Ok();
      Level up = std::move(stack.back());
      stack.pop_back();
      int parent = ::openat(d.fd(), "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (parent < 0) return Status::FromErrno("open .. at depth " + std::to_string(stack.size() + 1), errno);
      NODEVOL_RETURN_IF_ERROR(Open(parent, &d, &cur));
      if (cur.st_dev != up.dev || cur.st_ino != up.ino)
        return Status::Aborted("the tree changed during the walk: the parent of " + Where(up.child.c_str(), stack.size() + 1) +
                               " is no longer the directory the walk came from");
      if (ops.on_child_done) NODEVOL_RETURN_IF_ERROR(ops.on_child_done(d.fd(), up.child.c_str()));
      ::seekdir(d.get(), up.cookie);
      seen = up.seen;
      continue;
    }
    const char* name = e->d_name;
    if (std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) continue;
    seen = true;
    struct stat st;
    if (::fstatat(d.fd(), name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;  // gone since readdir
      return Status::FromErrno("fstatat " + Where(name, stack.size()), errno);
    }
    if (!S_ISDIR(st.st_mode)) {
      if (ops.on_entry) NODEVOL_RETURN_IF_ERROR(ops.on_entry(d.fd(), name, st));
      continue;
    }
    int child = ::openat(d.fd(), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (child < 0) {
      // Gone, or no longer a directory (a symlink swapped in): not ours to follow.
      if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR) continue;
      return Status::FromErrno("open " + Where(name, stack.size()), errno);
    }
    uint64_t mnt = 0;
    Status st_mnt = MountIdOf(child, &mnt);
    if (!st_mnt.ok() || mnt != root_mnt) {
      ::close(child);
      NODEVOL_RETURN_IF_ERROR(st_mnt);
      if (ops.on_other_mount) NODEVOL_RETURN_IF_ERROR(ops.on_other_mount(d.fd(), name));
      continue;
    }
    stack.push_back(Level{cur.st_dev, cur.st_ino, ::telldir(d.get()), seen, name});
    NODEVOL_RETURN_IF_ERROR(Open(child, &d, &cur));
    seen = false;
    // (`name` went with the parent's stream: the level keeps a copy.)
    if (ops.on_dir_enter) NODEVOL_RETURN_IF_ERROR(ops.on_dir_enter(d.fd(), stack.back().child.c_str(), cur));
  }
}

}  // namespace nodevol
