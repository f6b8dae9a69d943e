#include "backend/nfs/export_dirs.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <vector>

namespace nodevol {

namespace {
constexpr uint64_t kResolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
}  // namespace

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

namespace {

std::string Dirname(const std::string& rel) {
  size_t slash = rel.rfind('/');
  return slash == std::string::npos ? "" : rel.substr(0, slash);
}

std::string Basename(const std::string& rel) { return rel.substr(rel.rfind('/') + 1); }

// *exists for `name` in dirfd; any error but ENOENT (EACCES under a
// root-squashed parent, ESTALE) is returned, never taken for "exists".
Status Lookup(int dirfd, const std::string& name, const std::string& what, bool* exists) {
  struct stat st;
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    *exists = true;
    return Status::Ok();
  }
  int err = errno;
  if (err == EACCES || err == EPERM)
    return Status::FailedPrecondition("look up " + what + "/" + name + ": " + std::strerror(err) +
                                      " (the server refuses nodevold, root_squash?)");
  if (err == ESTALE)
    return Status::Unavailable("look up " + what + "/" + name + ": stale file handle (the export was re-created)");
  if (err != ENOENT) return Status::FromErrno("look up " + what + "/" + name, err);
  *exists = false;
  return Status::Ok();
}

bool IsDirEntry(int dirfd, const struct dirent* e) {
  if (e->d_type != DT_UNKNOWN) return e->d_type == DT_DIR;
  struct stat st;
  return ::fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

bool Dots(const char* n) { return n[0] == '.' && (n[1] == 0 || (n[1] == '.' && n[2] == 0)); }

enum class Opened { kDir, kMissing, kRemoved };

// Opens the directory `name` in `dir` for reading into *d, never through a
// symlink. A name that is a file or symlink (swapped in by whoever owns
// the export) is removed instead: it is doomed either way.
Status OpenDirOrRemove(int dir, const std::string& name, const std::string& what, DIR** d, Opened* how) {
  *d = nullptr;
  int fd = OpenAt2(dir, name, O_RDONLY | O_DIRECTORY);
  if (fd < 0) {
    if (errno == ENOENT) {
      *how = Opened::kMissing;
      return Status::Ok();
    }
    if (errno == ENOTDIR || errno == ELOOP) {
      if (::unlinkat(dir, name.c_str(), 0) != 0 && errno != ENOENT) return Status::FromErrno("remove " + what, errno);
      *how = Opened::kRemoved;
      return Status::Ok();
    }
    return OpenError("open " + what, errno);
  }
  *d = ::fdopendir(fd);
  if (!*d) {
    ::close(fd);
    return Status::FromErrno("read " + what, errno);
  }
  *how = Opened::kDir;
  return Status::Ok();
}

// Empties the directory `name` in `top` (the tombstone) by one level: files
// are removed, subdirectories are moved up into `top` under fresh names,
// for a later pass over `top` to deal with. *progress when anything went.
Status Flatten(int top, const std::string& name, const std::string& what, RemoveCursor* c,
               std::chrono::steady_clock::time_point until, bool* progress) {
  DIR* d = nullptr;
  Opened how;
  NODEVOL_RETURN_IF_ERROR(OpenDirOrRemove(top, name, what, &d, &how));
  if (how == Opened::kRemoved) *progress = true;
  if (how != Opened::kDir) return Status::Ok();
  Status st;
  errno = 0;
  while (struct dirent* e = ::readdir(d)) {
    if (Dots(e->d_name)) continue;
    if (*progress && std::chrono::steady_clock::now() > until) break;
    const std::string n = e->d_name;
    if (!IsDirEntry(::dirfd(d), e)) {
      if (::unlinkat(::dirfd(d), n.c_str(), 0) != 0 && errno != ENOENT) {
        st = Status::FromErrno("remove " + what + "/" + n, errno);
        break;
      }
      *progress = true;
    } else {
      // Up into the tombstone, whose every entry goes anyway: replacing
      // one of them (an empty directory of the same name) loses nothing.
      bool moved = false;
      for (int tries = 0; tries < 64 && !moved; ++tries) {
        std::string to = ".nodevol-rm-" + std::to_string(c->next_name++);
        if (::renameat(::dirfd(d), n.c_str(), top, to.c_str()) == 0) {
          moved = true;
        } else if (errno == ENOENT) {
          break;
        } else if (errno != EEXIST && errno != ENOTEMPTY && errno != ENOTDIR && errno != EISDIR) {
          st = Status::FromErrno("move " + what + "/" + n + " up to remove it", errno);
          break;
        }
      }
      if (!st.ok()) break;
      if (!moved) continue;
      *progress = true;
    }
    errno = 0;
  }
  if (st.ok() && errno != 0) st = Status::FromErrno("read " + what, errno);
  ::closedir(d);
  return st;
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

Status BindBelow(const std::string& root, const std::string& rel, const std::string& target) {
  UniqueFd fd;
  NODEVOL_RETURN_IF_ERROR(OpenBelow(root, rel, &fd));
  struct statfs sfs;
  if (::fstatfs(fd.get(), &sfs) != 0) return Status::FromErrno("statfs " + root + "/" + rel, errno);
  if (sfs.f_type != NFS_SUPER_MAGIC)
    return Status::FailedPrecondition("bind " + root + (rel.empty() ? "" : "/" + rel) + " on " + target +
                                      ": it is not on NFS (the export is not mounted at " + root +
                                      " right now: unmounted or being mounted again); try again");
  std::string src = "/proc/self/fd/" + std::to_string(fd.get());
  if (::mount(src.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0)
    return Status::FromErrno("bind " + root + "/" + rel + " on " + target, errno);
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

RemoveCursor::~RemoveCursor() {
  if (dir) ::closedir(static_cast<DIR*>(dir));
}

Status RemoveVolumeDir(const std::string& root, const std::string& rel, const std::string& tombstone,
                       std::chrono::steady_clock::time_point until, RemoveCursor* c, bool* done) {
  *done = false;
  const std::string dirname = Dirname(rel);
  const std::string what = root + "/" + (dirname.empty() ? "" : dirname + "/") + tombstone;
  if (!c->dir) {
    UniqueFd parent;
    Status st = OpenBelow(root, dirname, &parent);
    if (st.code() == Status::Code::kNotFound) {
      *done = true;
      return Status::Ok();
    }
    NODEVOL_RETURN_IF_ERROR(st);
    bool have_tomb = false;
    NODEVOL_RETURN_IF_ERROR(Lookup(parent.get(), tombstone, root + "/" + dirname, &have_tomb));
    if (!have_tomb) {
      // The first step of every delete: the volume's name is free from now
      // on, and nothing below touches anything but the tombstone.
      if (::renameat(parent.get(), Basename(rel).c_str(), parent.get(), tombstone.c_str()) != 0) {
        if (errno == ENOENT) {
          *done = true;
          return Status::Ok();
        }
        return Status::FromErrno("rename " + root + "/" + rel + " to " + tombstone, errno);
      }
    }
    DIR* d = nullptr;
    Opened how;
    NODEVOL_RETURN_IF_ERROR(OpenDirOrRemove(parent.get(), tombstone, what, &d, &how));
    if (how != Opened::kDir) {  // gone, or the volume's path was a file or symlink
      *done = true;
      return Status::Ok();
    }
    int pfd = ::dup(parent.get());
    if (pfd < 0) {
      int err = errno;
      ::closedir(d);
      return Status::FromErrno("dup", err);
    }
    c->parent.reset(pfd);
    c->dir = d;
    c->pass_saw = c->pass_removed = false;
  }
  DIR* d = static_cast<DIR*>(c->dir);
  const int top = ::dirfd(d);
  // The time is checked between entries, after the first: every slice
  // gets somewhere, however short.
  for (bool did_one = false;;) {
    if (did_one && std::chrono::steady_clock::now() > until) return Status::Ok();
    errno = 0;
    struct dirent* e = ::readdir(d);
    if (!e) {
      if (errno != 0) return Status::FromErrno("read " + what, errno);
      // End of a pass. Entries can be skipped while an NFS directory
      // changes under a reader: pass again until one sees nothing.
      if (c->pass_saw) {
        c->idle_passes = c->pass_removed ? 0 : c->idle_passes + 1;
        if (c->idle_passes < 2) {
          c->pass_saw = c->pass_removed = false;
          ::rewinddir(d);
          continue;
        }
      }
      if (::unlinkat(c->parent.get(), tombstone.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
        if (errno == ENOTEMPTY || errno == EEXIST || errno == EBUSY)
          return Status::FailedPrecondition("cannot remove " + what + " (the volume's directory, renamed): it is "
                                            "still not empty (files open on some NFS client stay as .nfs* until "
                                            "closed); delete again later");
        return Status::FromErrno("remove " + what, errno);
      }
      *done = true;
      return Status::Ok();
    }
    if (Dots(e->d_name)) continue;
    did_one = true;
    c->pass_saw = true;
    const std::string n = e->d_name;
    if (!IsDirEntry(top, e)) {
      if (::unlinkat(top, n.c_str(), 0) != 0 && errno != ENOENT) return Status::FromErrno("remove " + what + "/" + n, errno);
      c->pass_removed = true;
      continue;
    }
    if (::unlinkat(top, n.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT) {
      c->pass_removed = true;
      continue;
    }
    if (errno != ENOTEMPTY && errno != EEXIST)
      return Status::FromErrno("remove " + what + "/" + n, errno);
    bool progress = false;
    NODEVOL_RETURN_IF_ERROR(Flatten(top, n, what + "/" + n, c, until, &progress));
    if (progress) c->pass_removed = true;
    // Emptied now unless the deadline came first; a later pass removes it.
    if (::unlinkat(top, n.c_str(), AT_REMOVEDIR) == 0) c->pass_removed = true;
  }
}

Status ArchiveVolumeDir(const std::string& root, const std::string& rel, std::string* archived_as) {
  archived_as->clear();
  UniqueFd parent;
  Status st = OpenBelow(root, Dirname(rel), &parent);
  if (st.code() == Status::Code::kNotFound) return Status::Ok();
  NODEVOL_RETURN_IF_ERROR(st);
  std::string leaf = Basename(rel);
  const std::string where = root + (Dirname(rel).empty() ? "" : "/" + Dirname(rel));
  bool exists = false;
  NODEVOL_RETURN_IF_ERROR(Lookup(parent.get(), leaf, where, &exists));
  if (!exists) return Status::Ok();
  // Names stay within 255 bytes: the leaf is shortened, never the suffix.
  auto fit = [&](const std::string& suffix) {
    std::string prefix = "archived-";
    size_t room = 255 - prefix.size() - suffix.size();
    return prefix + leaf.substr(0, room) + suffix;
  };
  std::string name = fit("");
  NODEVOL_RETURN_IF_ERROR(Lookup(parent.get(), name, where, &exists));
  if (exists) {
    std::string stamp = "-" + UtcStamp();
    name = fit(stamp);
    // Bounded: a server that says every name exists must not spin the
    // worker forever.
    for (int n = 2;; ++n) {
      NODEVOL_RETURN_IF_ERROR(Lookup(parent.get(), name, where, &exists));
      if (!exists) break;
      if (n > 1000)
        return Status::FailedPrecondition("archive " + root + "/" + rel + ": 1000 archive names in " + where +
                                          " are taken; remove old archives");
      name = fit(stamp + "-" + std::to_string(n));
    }
  }
  // NFS has no RENAME_NOREPLACE; the names were checked just above.
  if (::renameat(parent.get(), leaf.c_str(), parent.get(), name.c_str()) != 0)
    return Status::FromErrno("rename " + root + "/" + rel + " to " + name, errno);
  std::string dir = Dirname(rel);
  *archived_as = dir.empty() ? name : dir + "/" + name;
  return Status::Ok();
}

}  // namespace nodevol
