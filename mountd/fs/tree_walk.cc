#include "fs/tree_walk.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <string>

namespace nodevol {
namespace {

// A directory the walk went down from: which one it was, and where to
// resume reading it. 56 bytes, whatever the names: a pod's million-level
// tree of 255-byte names cost ~330 bytes a level with the child's name
// kept here (issue 69 item 7); the name is read again from the directory.
struct Level {
  dev_t dev;
  ino_t ino;
  long before;      // telldir() just before the child's entry
  long after;       // and just after it: where reading resumes, always
  dev_t child_dev;  // the subdirectory the walk went into (a btrfs
  ino_t child_ino;  // subvolume has a device of its own)
  bool seen;        // entries met in the current pass (rescan)
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

// A statx's mount id, or (kernels before 5.8 have none) its device,
// marked so that it never equals a real mount id.
uint64_t MountIdFrom(const struct statx& stx) {
  return (stx.stx_mask & STATX_MNT_ID) ? stx.stx_mnt_id
                                       : (uint64_t{1} << 63) | makedev(stx.stx_dev_major, stx.stx_dev_minor);
}

// fstatat(AT_SYMLINK_NOFOLLOW) and the entry's mount id in one call: a
// file bind-mounted into the tree is on another mount too (issue 69 item
// 8: only directories were checked, and such a file was copied).
int StatAt(int dir, const char* name, struct stat* st, uint64_t* mnt) {
  struct statx stx;
  if (::statx(dir, name, AT_SYMLINK_NOFOLLOW | AT_STATX_SYNC_AS_STAT, STATX_BASIC_STATS | STATX_MNT_ID, &stx) != 0)
    return -1;
  *st = {};
  st->st_dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
  st->st_ino = stx.stx_ino;
  st->st_mode = stx.stx_mode;
  st->st_nlink = stx.stx_nlink;
  st->st_uid = stx.stx_uid;
  st->st_gid = stx.stx_gid;
  st->st_rdev = makedev(stx.stx_rdev_major, stx.stx_rdev_minor);
  st->st_size = static_cast<off_t>(stx.stx_size);
  st->st_blksize = stx.stx_blksize;
  st->st_blocks = static_cast<blkcnt_t>(stx.stx_blocks);
  st->st_atim = {stx.stx_atime.tv_sec, stx.stx_atime.tv_nsec};
  st->st_mtim = {stx.stx_mtime.tv_sec, stx.stx_mtime.tv_nsec};
  st->st_ctim = {stx.stx_ctime.tv_sec, stx.stx_ctime.tv_nsec};
  // 0 without a mount id (before 5.8): a file's device is its layer's on
  // overlayfs, so it cannot say.
  *mnt = (stx.stx_mask & STATX_MNT_ID) ? stx.stx_mnt_id : 0;
  return 0;
}

}  // namespace

Status MountIdOf(int fd, uint64_t* id) {
  struct statx stx;
  if (::statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MNT_ID, &stx) != 0)
    return Status::FromErrno("statx", errno);
  // Kernels before 5.8 have no mount id: the device is the next best thing.
  *id = MountIdFrom(stx);
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
  std::deque<Level> stack;  // no doubling, no copies as it grows
  std::string child_name;
  bool seen = false;
  for (;;) {
    const long before = ::telldir(d.get());
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
        return Status::Aborted("the tree changed during the walk: the parent of a directory at depth " +
                               std::to_string(stack.size() + 1) + " is no longer the directory the walk came from");
      // The child's entry again, where it was: its name, if it is still
      // that directory; else (renamed or removed meanwhile) no name.
      ::seekdir(d.get(), up.before);
      errno = 0;
      struct dirent* again = ::readdir(d.get());
      struct stat cst;
      bool named = again && ::fstatat(d.fd(), again->d_name, &cst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(cst.st_mode) &&
                   cst.st_ino == up.child_ino && cst.st_dev == up.child_dev;
      if (named) child_name.assign(again->d_name);  // one buffer for the walk, not one a level
      // Reading resumes where the walk left, in any case: never at the
      // child again (a pod swapping names as the walk leaves, or a btrfs
      // subvolume's own device, looped it for ever).
      ::seekdir(d.get(), up.after);
      if (ops.on_child_done) NODEVOL_RETURN_IF_ERROR(ops.on_child_done(d.fd(), named ? child_name.c_str() : nullptr));
      seen = up.seen;
      continue;
    }
    const char* name = e->d_name;
    if (std::strcmp(name, ".") == 0 || std::strcmp(name, "..") == 0) continue;
    seen = true;
    struct stat st;
    uint64_t entry_mnt = 0;
    if (StatAt(d.fd(), name, &st, &entry_mnt) != 0) {
      if (errno == ENOENT) continue;  // gone since readdir
      return Status::FromErrno("statx " + Where(name, stack.size()), errno);
    }
    if (!S_ISDIR(st.st_mode)) {
      if (entry_mnt != 0 && entry_mnt != root_mnt) {
        if (ops.on_other_mount) NODEVOL_RETURN_IF_ERROR(ops.on_other_mount(d.fd(), name));
      } else if (ops.on_entry) {
        NODEVOL_RETURN_IF_ERROR(ops.on_entry(d.fd(), name, st));
      }
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
    // (`name` goes with the parent's stream: copied for on_dir_enter.)
    const std::string entered = name;
    stack.push_back(Level{cur.st_dev, cur.st_ino, before, ::telldir(d.get()), 0, 0, seen});
    NODEVOL_RETURN_IF_ERROR(Open(child, &d, &cur));
    stack.back().child_dev = cur.st_dev;
    stack.back().child_ino = cur.st_ino;
    seen = false;
    if (ops.on_dir_enter) NODEVOL_RETURN_IF_ERROR(ops.on_dir_enter(d.fd(), entered.c_str(), cur));
  }
}

}  // namespace nodevol
