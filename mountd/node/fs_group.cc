#include "node/fs_group.h"

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace nodevol {
namespace {

thread_local gid_t walk_gid;

int Apply(const char* path, const struct stat* st, int type, struct FTW*) {
  if (::lchown(path, static_cast<uid_t>(-1), walk_gid) != 0 && errno != ENOENT) return errno;
  if (type == FTW_SL || type == FTW_SLN) return 0;  // symlinks have no mode of their own
  mode_t mode = (st->st_mode & 07777) | S_IRGRP | S_IWGRP;
  if (S_ISDIR(st->st_mode)) mode |= S_ISGID | S_IXGRP | S_IXUSR;
  if (mode != (st->st_mode & 07777) && ::chmod(path, mode) != 0 && errno != ENOENT) return errno;
  return 0;
}

}  // namespace

Status ApplyFsGroup(const std::string& root, gid_t gid) {
  struct stat st;
  if (::stat(root.c_str(), &st) != 0) return Status::FromErrno("stat " + root, errno);
  if (st.st_gid == gid && (st.st_mode & S_ISGID)) return Status::Ok();
  walk_gid = gid;
  // Post-order: the root is changed last, so an interrupted walk is redone.
  int rc = ::nftw(root.c_str(), Apply, 32, FTW_PHYS | FTW_MOUNT | FTW_DEPTH);
  if (rc != 0) return Status::FromErrno("apply fsGroup " + std::to_string(gid) + " to " + root, rc == -1 ? errno : rc);
  return Status::Ok();
}

}  // namespace nodevol
