#include "backend/nfs/export_dirs.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <vector>

namespace nodevol {
namespace {

constexpr uint64_t kResolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;

int OpenAt2(int dirfd, const std::string& path, uint64_t flags) {
  struct open_how how = {};
  how.flags = flags | O_CLOEXEC | O_NOFOLLOW;
  how.resolve = kResolve;
  for (;;) {
    int fd = static_cast<int>(::syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof how));
    if (fd >= 0 || errno != EAGAIN) return fd;  // EAGAIN: a rename raced the lookup
  }
}

// An open below the export that failed: a symlink, a file or another
// filesystem in the way is the server's doing, not an internal error.
Status OpenError(const std::string& what, int err) {
  if (err == ELOOP || err == EXDEV || err == ENOTDIR)
    return Status::FailedPrecondition(what + ": a symlink, a file or another filesystem is in the way on the server (" +
                                      std::strerror(err) + "); nodevold does not follow it");
  return Status::FromErrno(what, err);
}

std::string Dirname(const std::string& rel) {
  size_t slash = rel.rfind('/');
  return slash == std::string::npos ? "" : rel.substr(0, slash);
}

std::string Basename(const std::string& rel) { return rel.substr(rel.rfind('/') + 1); }

bool Exists(int dirfd, const std::string& name) {
  struct stat st;
  return ::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT;
}

// Names in a directory (a snapshot: removing while reading an NFS
// directory can skip entries).
Status List(int dirfd, const std::string& what, std::vector<std::pair<std::string, unsigned char>>* out) {
  int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("open " + what, errno);
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return Status::FromErrno("read " + what, errno);
  }
  errno = 0;
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out->emplace_back(n, e->d_type);
    errno = 0;
  }
  int err = errno;
  ::closedir(d);
  if (err) return Status::FromErrno("read " + what, err);
  return Status::Ok();
}

// Empties the directory open at `dirfd` and removes it as `name` in `parent`.
Status RemoveTree(int parent, const std::string& name, const std::string& what,
                  std::chrono::steady_clock::time_point until, bool* done) {
  UniqueFd fd(OpenAt2(parent, name, O_RDONLY | O_DIRECTORY));
  if (fd.get() < 0) {
    if (errno == ENOENT) {
      *done = true;
      return Status::Ok();
    }
    if (errno == ENOTDIR || errno == ELOOP) {  // a file or symlink: remove the entry itself
      if (::unlinkat(parent, name.c_str(), 0) != 0 && errno != ENOENT) return Status::FromErrno("remove " + what, errno);
      *done = true;
      return Status::Ok();
    }
    return OpenError("open " + what, errno);
  }
  for (int pass = 0; pass < 3; ++pass) {
    std::vector<std::pair<std::string, unsigned char>> entries;
    NODEVOL_RETURN_IF_ERROR(List(fd.get(), what, &entries));
    if (entries.empty()) break;
    for (const auto& [n, type] : entries) {
      if (std::chrono::steady_clock::now() > until) {
        *done = false;
        return Status::Ok();
      }
      bool dir = type == DT_DIR;
      if (type == DT_UNKNOWN) {
        struct stat st;
        dir = ::fstatat(fd.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
      }
      if (dir) {
        bool sub_done = false;
        NODEVOL_RETURN_IF_ERROR(RemoveTree(fd.get(), n, what + "/" + n, until, &sub_done));
        if (!sub_done) {
          *done = false;
          return Status::Ok();
        }
      } else if (::unlinkat(fd.get(), n.c_str(), 0) != 0 && errno != ENOENT) {
        return Status::FromErrno("remove " + what + "/" + n, errno);
      }
    }
  }
  if (::unlinkat(parent, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    if (errno == ENOTEMPTY || errno == EEXIST || errno == EBUSY)
      return Status::FailedPrecondition("cannot remove " + what +
                                        ": it is still not empty (files open on some NFS client stay as .nfs* "
                                        "until closed); delete again later");
    return Status::FromErrno("remove " + what, errno);
  }
  *done = true;
  return Status::Ok();
}

std::string UtcStamp() {
  std::time_t now = std::time(nullptr);
  struct tm tm;
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

}  // namespace

Status StatFresh(const std::string& dir) {
  struct statx stx;
  if (::statx(AT_FDCWD, dir.c_str(), AT_SYMLINK_NOFOLLOW | AT_STATX_FORCE_SYNC, STATX_BASIC_STATS, &stx) != 0) {
    int err = errno;
    if (err == ESTALE) return Status::Unavailable("stat " + dir + ": stale file handle (the export was re-created)");
    return Status::FromErrno("stat " + dir, err);
  }
  if (!S_ISDIR(stx.stx_mode)) return Status::FailedPrecondition(dir + " is not a directory");
  return Status::Ok();
}

Status OpenBelow(const std::string& root, const std::string& rel, UniqueFd* out) {
  UniqueFd r(::open(root.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (r.get() < 0) return Status::FromErrno("open " + root, errno);
  if (rel.empty()) {
    out->reset(::dup(r.get()));
    if (out->get() < 0) return Status::FromErrno("dup", errno);
    return Status::Ok();
  }
  int fd = OpenAt2(r.get(), rel, O_PATH | O_DIRECTORY);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return Status::NotFound("directory " + rel + " is missing below " + root);
    return OpenError("open " + root + "/" + rel, err);
  }
  out->reset(fd);
  return Status::Ok();
}

Status MakeVolumeDir(const std::string& root, const std::string& rel, const VolumeRoot& vroot, bool chown) {
  UniqueFd cur;
  NODEVOL_RETURN_IF_ERROR(OpenBelow(root, "", &cur));
  std::string done;
  size_t start = 0;
  for (;;) {
    size_t slash = rel.find('/', start);
    bool last = slash == std::string::npos;
    std::string seg = rel.substr(start, last ? std::string::npos : slash - start);
    done += (done.empty() ? "" : "/") + seg;
    if (::mkdirat(cur.get(), seg.c_str(), last ? 0700 : 0755) != 0 && errno != EEXIST)
      return Status::FromErrno("mkdir " + root + "/" + done, errno);
    int fd = OpenAt2(cur.get(), seg, last ? (O_RDONLY | O_DIRECTORY) : (O_PATH | O_DIRECTORY));
    if (fd < 0) return OpenError("open " + root + "/" + done, errno);
    cur.reset(fd);
    if (last) break;
    start = slash + 1;
  }
  if (chown && ::fchown(cur.get(), vroot.uid, vroot.gid) != 0)
    return Status::FromErrno("chown " + root + "/" + rel + " (an export with root_squash refuses this)", errno);
  if (::fchmod(cur.get(), vroot.mode) != 0) return Status::FromErrno("chmod " + root + "/" + rel, errno);
  return Status::Ok();
}

Status RemoveVolumeDir(const std::string& root, const std::string& rel,
                       std::chrono::steady_clock::time_point until, bool* done) {
  UniqueFd parent;
  Status st = OpenBelow(root, Dirname(rel), &parent);
  if (st.code() == Status::Code::kNotFound) {
    *done = true;
    return Status::Ok();
  }
  NODEVOL_RETURN_IF_ERROR(st);
  return RemoveTree(parent.get(), Basename(rel), root + "/" + rel, until, done);
}

Status ArchiveVolumeDir(const std::string& root, const std::string& rel, std::string* archived_as) {
  archived_as->clear();
  UniqueFd parent;
  Status st = OpenBelow(root, Dirname(rel), &parent);
  if (st.code() == Status::Code::kNotFound) return Status::Ok();
  NODEVOL_RETURN_IF_ERROR(st);
  std::string leaf = Basename(rel);
  if (!Exists(parent.get(), leaf)) return Status::Ok();
  // Names stay within 255 bytes: the leaf is shortened, never the suffix.
  auto fit = [&](const std::string& suffix) {
    std::string prefix = "archived-";
    size_t room = 255 - prefix.size() - suffix.size();
    return prefix + leaf.substr(0, room) + suffix;
  };
  std::string name = fit("");
  if (Exists(parent.get(), name)) {
    std::string stamp = "-" + UtcStamp();
    name = fit(stamp);
    for (int n = 2; Exists(parent.get(), name); ++n) name = fit(stamp + "-" + std::to_string(n));
  }
  // NFS has no RENAME_NOREPLACE; the names were checked just above.
  if (::renameat(parent.get(), leaf.c_str(), parent.get(), name.c_str()) != 0)
    return Status::FromErrno("rename " + root + "/" + rel + " to " + name, errno);
  std::string dir = Dirname(rel);
  *archived_as = dir.empty() ? name : dir + "/" + name;
  return Status::Ok();
}

}  // namespace nodevol
