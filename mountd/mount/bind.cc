#include "mount/bind.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <map>
#include <set>

#include "mount/mount_table.h"

namespace nodevol {
namespace {

// An O_PATH descriptor that pins a directory (or, for a raw block volume,
// its device node and the file it is bound onto); mount(2) and friends
// reach it through /proc/self/fd/N so a later rename or symlink swap of the
// path cannot redirect the call.
class PinnedDir {
 public:
  ~PinnedDir() { if (fd_ >= 0) ::close(fd_); }
  Status Open(const std::string& path, bool device = false) {
    fd_ = ::open(path.c_str(), O_PATH | O_NOFOLLOW | (device ? 0 : O_DIRECTORY) | O_CLOEXEC);
    // A symlink (or a file) swapped in after the path was checked: what the
    // caller named is not a directory, which is theirs to fix, not ours.
    if (fd_ < 0 && (errno == ENOTDIR || errno == ELOOP))
      return Status::InvalidArgument("\"" + path + "\" is not a directory (nodevold follows no symlink here)");
    if (fd_ < 0) return Status::FromErrno("open " + path, errno);
    struct stat st;
    if (device && (::fstat(fd_, &st) != 0 || !(S_ISBLK(st.st_mode) || S_ISREG(st.st_mode))))
      return Status::InvalidArgument("\"" + path + "\" is neither a block device nor a regular file");
    // The kernel's view of what we opened must be the path we validated.
    char buf[PATH_MAX];
    ssize_t n = ::readlink(proc_path().c_str(), buf, sizeof buf - 1);
    if (n < 0) return Status::FromErrno("readlink " + proc_path(), errno);
    if (std::string(buf, static_cast<size_t>(n)) != path)
      return Status::FailedPrecondition("path \"" + path + "\" changed while being mounted (now \"" +
                                        std::string(buf, static_cast<size_t>(n)) + "\")");
    return Status::Ok();
  }
  std::string proc_path() const { return "/proc/self/fd/" + std::to_string(fd_); }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

// Whether path is the root of a mount: statx's STATX_ATTR_MOUNT_ROOT, or the
// mount table where the kernel does not report it.
Status IsMountRoot(const std::string& path, bool* root, struct statx* stx) {
  NODEVOL_RETURN_IF_ERROR(StatCached(path, false, stx));
  if (stx->stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) {
    *root = (stx->stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
    return Status::Ok();
  }
  MountTable table;
  NODEVOL_RETURN_IF_ERROR(table.Load());
  *root = table.FindTarget(path) != nullptr;
  return Status::Ok();
}

// A raw block volume's source is its device node, named through lvm's
// /dev/<vg>/<lv> link: bound by the node itself (*device set), with the
// link resolved. Anything else is a directory, never followed.
Status BindSource(const std::string& source, std::string* path, bool* device) {
  // Cached attributes only (StatCached): the source may be on an NFS
  // export whose server is gone, where stat(2) would hang this call.
  struct statx st;
  *path = source;
  *device = ::statx(AT_FDCWD, source.c_str(), AT_STATX_DONT_SYNC, STATX_TYPE, &st) == 0 && S_ISBLK(st.stx_mode);
  if (!*device) return Status::Ok();
  char buf[PATH_MAX];
  if (!::realpath(source.c_str(), buf)) return Status::FromErrno("resolve " + source, errno);
  *path = buf;
  return Status::Ok();
}

// The comma-separated options of a mount table entry, as a set.
std::set<std::string> OptionSet(const std::string& options) {
  std::set<std::string> out;
  for (size_t at = 0; at <= options.size();) {
    size_t end = std::min(options.find(',', at), options.size());
    out.insert(options.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

}  // namespace

Status StatCached(const std::string& path, bool follow, struct statx* out) {
  int flags = AT_STATX_DONT_SYNC | (follow ? 0 : AT_SYMLINK_NOFOLLOW);
  if (::statx(AT_FDCWD, path.c_str(), flags, STATX_TYPE | STATX_INO, out) != 0)
    return Status::FromErrno("statx " + path, errno);
  return Status::Ok();
}

Status InspectMount(const std::string& source, const std::string& target, MountState* state,
                    bool* read_only, const MountTable* snapshot) {
  struct statx tx;
  bool root = false;
  NODEVOL_RETURN_IF_ERROR(IsMountRoot(target, &root, &tx));
  if (!root) {
    *state = MountState::kNotMounted;
    return Status::Ok();
  }
  struct statx sx;
  NODEVOL_RETURN_IF_ERROR(StatCached(source, true, &sx));
  bool same = tx.stx_dev_major == sx.stx_dev_major && tx.stx_dev_minor == sx.stx_dev_minor && tx.stx_ino == sx.stx_ino;
  *state = same ? MountState::kMountedSource : MountState::kMountedOther;
  if (read_only) {
    // The mount table, not statvfs(2): statfs of an NFS mount asks the server.
    MountTable table;
    if (!snapshot) NODEVOL_RETURN_IF_ERROR(table.Load());
    const MountEntry* e = (snapshot ? snapshot : &table)->FindTarget(target);
    if (!e) return Status::Internal(target + " is a mount root but not in the mount table");
    *read_only = e->options == "ro" || e->options.rfind("ro,", 0) == 0;
  }
  return Status::Ok();
}

unsigned long InheritedBindFlags(const std::string& source, bool remote, const MountTable* snapshot) {
  if (!remote) {
    struct statvfs vfs;
    if (::statvfs(source.c_str(), &vfs) != 0) return 0;
    return (vfs.f_flag & ST_NOSUID ? MS_NOSUID : 0) | (vfs.f_flag & ST_NODEV ? MS_NODEV : 0) |
           (vfs.f_flag & ST_NOEXEC ? MS_NOEXEC : 0);
  }
  MountTable table;
  if (!snapshot && !table.Load().ok()) return 0;
  const MountEntry* on = nullptr;  // the top-most mount holding source
  for (const MountEntry& e : (snapshot ? snapshot : &table)->entries()) {
    const std::string& t = e.target;
    bool holds = t == "/" || source == t ||
                 (source.size() > t.size() && source.compare(0, t.size(), t) == 0 && source[t.size()] == '/');
    if (holds && (!on || t.size() >= on->target.size())) on = &e;
  }
  unsigned long flags = 0;
  if (!on) return flags;
  std::set<std::string> has = OptionSet(on->options);
  for (auto [bit, name] : {std::pair{MS_NOSUID, "nosuid"}, {MS_NODEV, "nodev"}, {MS_NOEXEC, "noexec"}})
    if (has.count(name)) flags |= bit;
  return flags;
}

bool ShowsFlags(const std::string& options, bool read_only, unsigned long flags) {
  std::set<std::string> has = OptionSet(options);
  if (!has.count(read_only ? "ro" : "rw")) return false;
  for (auto [bit, name] : {std::pair{MS_NOSUID, "nosuid"}, {MS_NODEV, "nodev"}, {MS_NOEXEC, "noexec"}})
    if (((flags & bit) != 0) != (has.count(name) != 0)) return false;
  for (auto [bit, name] : {std::pair{MS_NOATIME, "noatime"}, {MS_NODIRATIME, "nodiratime"}, {MS_RELATIME, "relatime"}})
    if ((flags & bit) && !has.count(name)) return false;
  return true;
}

Status ParseBindOptions(const std::vector<std::string>& options, unsigned long* flags) {
  static const std::map<std::string, unsigned long> kKnown = {
      {"nosuid", MS_NOSUID},     {"nodev", MS_NODEV},           {"noexec", MS_NOEXEC},
      {"noatime", MS_NOATIME},   {"nodiratime", MS_NODIRATIME}, {"relatime", MS_RELATIME},
      {"strictatime", MS_STRICTATIME}, {"ro", MS_RDONLY},       {"rw", 0},
      {"bind", 0},               {"defaults", 0},
  };
  *flags = 0;
  for (const std::string& o : options) {
    auto it = kKnown.find(o);
    if (it == kKnown.end())
      return Status::InvalidArgument("mount option \"" + o +
                                     "\" is not supported for bind mounts; use nosuid, nodev, noexec, "
                                     "noatime, nodiratime, relatime, strictatime, ro or rw");
    *flags |= it->second;
  }
  return Status::Ok();
}

Status BindMount(const std::string& source, const std::string& target, bool read_only,
                 unsigned long flags) {
  PinnedDir src, dst;
  std::string from;
  bool device = false;
  NODEVOL_RETURN_IF_ERROR(BindSource(source, &from, &device));
  NODEVOL_RETURN_IF_ERROR(src.Open(from, device));
  NODEVOL_RETURN_IF_ERROR(dst.Open(target, device));
  if (::mount(src.proc_path().c_str(), dst.proc_path().c_str(), nullptr, MS_BIND, nullptr) != 0)
    return Status::FromErrno("bind mount " + source + " on " + target, errno);
  if (!read_only && flags == 0) return Status::Ok();
  Status st = Remount(source, target, read_only, flags);
  if (st.ok()) return st;
  // Take the bind away through the pinned descriptor, not the path: a pod
  // may have renamed the directory away (and put a symlink in its place)
  // since the bind, and the path would then miss it. umount(2) of the
  // descriptor's /proc link unmounts what is mounted on that directory.
  // A bind left without its read-only remount is a writable view of the
  // volume: say so when it cannot be taken away again.
  if (::umount2(dst.proc_path().c_str(), 0) != 0 && errno != EINVAL)
    return Status::Internal(st.message() + "; unmounting the bind again failed too (" + std::strerror(errno) +
                            "): " + target + " is still mounted without its flags");
  return st;
}

Status Remount(const std::string& source, const std::string& target, bool read_only, unsigned long flags) {
  // Open the path afresh: it must show the mount's root. Remounting through
  // a descriptor taken before the bind would change the *parent* mount.
  PinnedDir src, mounted;
  std::string from;
  bool device = false;
  NODEVOL_RETURN_IF_ERROR(BindSource(source, &from, &device));
  NODEVOL_RETURN_IF_ERROR(src.Open(from, device));
  NODEVOL_RETURN_IF_ERROR(mounted.Open(target, device));
  // Cached attributes only (see StatCached): reconcile remounts every
  // publication at start, and a dead NFS server must not hang that.
  struct statx a, b;
  auto cached = [](int fd, struct statx* st) {
    return ::statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE | STATX_INO, st) == 0;
  };
  if (!cached(mounted.fd(), &a) || !cached(src.fd(), &b)) return Status::FromErrno("statx " + target, errno);
  if (a.stx_dev_major != b.stx_dev_major || a.stx_dev_minor != b.stx_dev_minor || a.stx_ino != b.stx_ino)
    return Status::FailedPrecondition(target + " does not show " + source + "; not remounting it");
  if (read_only) flags |= MS_RDONLY;
  if (::mount(nullptr, mounted.proc_path().c_str(), nullptr, MS_BIND | MS_REMOUNT | flags, nullptr) != 0)
    return Status::FromErrno("remount " + target + " with flags", errno);
  return Status::Ok();
}

Status CheckNotBound(const std::string& dir) {
  struct statx d;
  if (::statx(AT_FDCWD, dir.c_str(), AT_STATX_DONT_SYNC | AT_SYMLINK_NOFOLLOW, STATX_TYPE | STATX_INO, &d) != 0)
    return errno == ENOENT ? Status::Ok() : Status::FromErrno("statx " + dir, errno);
  MountTable table;
  NODEVOL_RETURN_IF_ERROR(table.Load());
  for (const MountEntry& e : table.entries()) {
    struct statx m;
    if (e.target == dir || !StatCached(e.target, false, &m).ok()) continue;
    if (m.stx_dev_major == d.stx_dev_major && m.stx_dev_minor == d.stx_dev_minor && m.stx_ino == d.stx_ino)
      return Status::FailedPrecondition(dir + " is still mounted at " + e.target + "; unmount that first");
  }
  return Status::Ok();
}

Status Unmount(const std::string& target) {
  if (::umount2(target.c_str(), UMOUNT_NOFOLLOW) == 0) return Status::Ok();
  switch (errno) {
    case EINVAL:  // not a mount point
    case ENOENT:
      return Status::Ok();
    case EBUSY:
      return Status::FailedPrecondition("target " + target +
                                        " is busy: a process still uses it (see `fuser -vm " + target + "`)");
    default:
      return Status::FromErrno("unmount " + target, errno);
  }
}

}  // namespace nodevol
