#include "base/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "base/unique_fd.h"
#include <filesystem>

namespace nodevol {

Status FileChangeError(std::string_view what, int err) {
  Status st = Status::FromErrno(what, err);
  switch (err) {
    case ENOSPC:
    case EDQUOT:
      return Status::Unavailable(st.message() + " (its filesystem is full: free space there)");
    case EROFS:
      return Status::Unavailable(st.message() +
                                 " (its filesystem is read-only, e.g. remounted after an I/O error: see the kernel "
                                 "log)");
    default:
      return st;
  }
}

Status FsyncDir(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return Status::FromErrno("open " + dir, errno);
  if (::fsync(fd.get()) != 0) return FileChangeError("fsync " + dir, errno);
  return Status::Ok();
}

Status WriteFileAtomic(const std::string& dir, const std::string& name, std::string_view contents,
                       bool durable, mode_t mode) {
  std::string tmp = dir + "/" + std::string(kTempPrefix) + name;
  std::string path = dir + "/" + name;
  // A temp file left by a killed write goes first: a new inode is the
  // only one no earlier opener holds and no hard link shares.
  if (::unlink(tmp.c_str()) != 0 && errno != ENOENT) return FileChangeError("remove " + tmp, errno);
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
  if (fd.get() < 0) return FileChangeError("create " + tmp, errno);
  // open's mode applies only when it creates the file: a temp file left by
  // a killed write keeps whatever mode it had, and a key written over it
  // would get that mode. Set it before the first byte.
  if (::fchmod(fd.get(), mode) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return FileChangeError("chmod " + tmp, err);
  }
  const char* p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    ssize_t n = ::write(fd.get(), p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::unlink(tmp.c_str());
      return FileChangeError("write " + tmp, err);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (durable && ::fsync(fd.get()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return FileChangeError("fsync " + tmp, err);
  }
  fd.reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return FileChangeError("rename " + tmp + " to " + path, err);
  }
  return durable ? FsyncDir(dir) : Status::Ok();
}

Status RemoveFile(const std::string& dir, const std::string& name, bool durable) {
  std::string path = dir + "/" + name;
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return FileChangeError("unlink " + path, errno);
  }
  return durable ? FsyncDir(dir) : Status::Ok();
}

Status ReadWholeFile(const std::string& path, std::string* out) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd.get() < 0) return Status::FromErrno("open " + path, errno);
  out->clear();
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("read " + path, errno);
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  return Status::Ok();
}

Status EnsureDir(const std::string& dir, mode_t mode, bool enforce_mode) {
  std::error_code ec;
  bool created = std::filesystem::create_directories(dir, ec);
  if (ec) return Status::Internal("cannot create directory " + dir + ": " + ec.message());
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return Status::FromErrno("stat " + dir, errno);
  if (!S_ISDIR(st.st_mode)) return Status::FailedPrecondition(dir + " exists and is not a directory");
  if ((created || enforce_mode) && (st.st_mode & 07777) != mode && ::chmod(dir.c_str(), mode) != 0)
    return Status::FromErrno("chmod " + dir, errno);
  return Status::Ok();
}

Status MakePrivateDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return Status::FromErrno("mkdir " + dir, errno);
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) return Status::FromErrno("stat " + dir, errno);
  if (!S_ISDIR(st.st_mode)) return Status::FailedPrecondition(dir + " exists and is not a directory");
  return Status::Ok();
}

Status RemoveTempFiles(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return Status::FromErrno("opendir " + dir, errno);
  bool removed = false;
  while (struct dirent* e = ::readdir(d)) {
    std::string_view n(e->d_name);
    if (n.substr(0, kTempPrefix.size()) == kTempPrefix) {
      ::unlinkat(::dirfd(d), e->d_name, 0);
      removed = true;
    }
  }
  ::closedir(d);
  return removed ? FsyncDir(dir) : Status::Ok();
}

}  // namespace nodevol
