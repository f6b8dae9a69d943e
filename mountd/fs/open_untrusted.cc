#include "fs/open_untrusted.h"

#include <fcntl.h>

#include <cerrno>

namespace nodevol {

const char* KindOf(mode_t mode) {
  switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFLNK: return "a symlink";
    case S_IFIFO: return "a FIFO";
    case S_IFSOCK: return "a socket";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    default: return "of an unknown type";
  }
}

Status OpenPathNoFollow(int dir, const std::string& name, UniqueFd* path_fd, struct stat* st) {
  UniqueFd fd(::openat(dir, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return Status::NotFound("\"" + name + "\" does not exist");
    return Status::FromErrno("open \"" + name + "\"", errno);
  }
  if (::fstat(fd.get(), st) != 0) return Status::FromErrno("fstat \"" + name + "\"", errno);
  path_fd->reset(fd.release());
  return Status::Ok();
}

Status ReopenAs(int path_fd, const struct stat& st, FileType type, int flags, const std::string& what, UniqueFd* out) {
  const bool ok = type == FileType::kRegular ? S_ISREG(st.st_mode) : S_ISDIR(st.st_mode);
  if (!ok)
    return Status::FailedPrecondition(what + " is " + KindOf(st.st_mode) + ", not " +
                                      (type == FileType::kRegular ? "a regular file" : "a directory"));
  // The magic link reaches exactly the inode path_fd holds, whatever the
  // name points to by now.
  const std::string self = "/proc/self/fd/" + std::to_string(path_fd);
  int fd = ::open(self.c_str(), (flags & ~O_NOFOLLOW) | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return Status::FromErrno("open " + what, errno);
  out->reset(fd);
  return Status::Ok();
}

Status OpenUntrusted(int dir, const std::string& name, FileType type, int flags, const std::string& what,
                     UniqueFd* out, struct stat* st) {
  UniqueFd path;
  NODEVOL_RETURN_IF_ERROR(OpenPathNoFollow(dir, name, &path, st));
  return ReopenAs(path.get(), *st, type, flags, what, out);
}

}  // namespace nodevol
