#include "fs/tree_copy.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <cstring>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "fs/open_untrusted.h"
#include "fs/tree_walk.h"

namespace nodevol {
namespace {

Status Errno(const std::string& what, int err) {
  if (err == EDQUOT || err == ENOSPC)
    return Status::ResourceExhausted(what + ": the destination is full (" + std::string(strerror(err)) + ")");
  return Status::FromErrno(what, err);
}

std::string Quoted(const char* name) { return "\"" + std::string(name) + "\""; }

// A copy that would take more than the caller measured: the pod wrote
// meanwhile. Its caller reserved only what it measured, so the copy ends
// here, before it takes more.
Status Grew(const std::string& what, const char* kind, uint64_t budget) {
  return Status::Aborted("the source grew while it was copied (at " + what + "): the copy would take more than the " +
                         std::to_string(budget) + " " + kind + " measured before it began; try again");
}

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  uint64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<uint64_t>::max() : sum;
}

// The block the filesystem of fd allocates in (what a write of one byte
// takes).
Status BlockSize(int fd, uint64_t* block) {
  struct statvfs vfs;
  if (::fstatvfs(fd, &vfs) != 0) return Errno("statvfs of the copy", errno);
  *block = std::max<uint64_t>(vfs.f_frsize ? vfs.f_frsize : vfs.f_bsize, 512);
  return Status::Ok();
}

uint64_t RoundUp(uint64_t n, uint64_t block) { return n % block ? SaturatingAdd(n - n % block, block) : n; }

// What an entry costs its directory in the copy, whatever blocks that
// directory ends up with: a pod may rename its entries to 255-byte names
// after the measure (ext4's dirent: 8 bytes and the name, 4-aligned).
uint64_t EntryCost(const char* name) { return 8 + RoundUp(std::strlen(name), 4); }

// What a symlink's target takes: nothing up to 59 bytes (kept in the
// inode by ext4 and xfs), else a block.
uint64_t SymlinkCost(uint64_t target_length, uint64_t block) {
  return target_length < 60 ? 0 : RoundUp(target_length + 1, block);
}

// What the copy is allowed and what it has taken so far. Charges are in
// the destination's blocks (the source's filesystem: a copy stays in its
// pool), so a pod's 1-byte writes into a million empty files cost the
// copy the million blocks they take.
struct Budget {
  const TreeSize& limit;
  TreeCopyStats* stats;
  uint64_t block;
  uint64_t made() const { return stats->files + stats->dirs + stats->symlinks + stats->fifos; }
  // Before an entry is made: one entry, and its cost in its directory.
  Status Entry(const char* name) const {
    if (made() >= limit.entries) return Grew(Quoted(name), "entries", limit.entries);
    return Charge(EntryCost(name), Quoted(name));
  }
  // Before `bytes` are written.
  Status Charge(uint64_t bytes, const std::string& what) const {
    const uint64_t left = limit.bytes > stats->written ? limit.bytes - stats->written : 0;
    if (bytes > left) return Grew(what, "bytes", limit.bytes);
    stats->written += bytes;
    return Status::Ok();
  }
};

// Owner, mode and times of an open destination from the source's stat.
Status ApplyMetadata(int fd, const struct stat& st, const std::string& what) {
  if (::fchown(fd, st.st_uid, st.st_gid) != 0) return Errno("chown " + what, errno);
  // After chown: chown clears setuid and setgid.
  if (::fchmod(fd, st.st_mode & 07777) != 0) return Errno("chmod " + what, errno);
  struct timespec times[2] = {st.st_atim, st.st_mtim};
  if (::futimens(fd, times) != 0) return Errno("set the times of " + what, errno);
  return Status::Ok();
}

// Copies [from, to) of in to the same offsets of out: copy_file_range,
// else pread/pwrite. Stops early if the file shrank meanwhile. The blocks
// the range covers are charged first: ABORTED, writing nothing, when the
// budget does not hold them.
Status CopyRange(int in, int out, off_t from, off_t to, const std::string& what, const Budget& budget) {
  TreeCopyStats* stats = budget.stats;
  if (from >= to) return Status::Ok();
  const uint64_t first = static_cast<uint64_t>(from) - static_cast<uint64_t>(from) % budget.block;
  NODEVOL_RETURN_IF_ERROR(budget.Charge(RoundUp(static_cast<uint64_t>(to), budget.block) - first, what));
  bool range = true;
  std::vector<char> buf;
  for (off_t pos = from; pos < to;) {
    size_t want = static_cast<size_t>(std::min<off_t>(to - pos, 1 << 30));
    ssize_t n = -1;
    if (range) {
      off_t in_off = pos, out_off = pos;
      n = ::copy_file_range(in, &in_off, out, &out_off, want, 0);
      if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
        range = false;
        continue;
      }
    } else {
      if (buf.empty()) buf.resize(1 << 20);
      n = ::pread(in, buf.data(), std::min(want, buf.size()), pos);
      for (ssize_t done = 0; n > 0 && done < n;) {
        ssize_t w = ::pwrite(out, buf.data() + done, static_cast<size_t>(n - done), pos + done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return Errno("write " + what, errno);
        done += w;
      }
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("copy " + what, errno);
    if (n == 0) break;
    pos += n;
    stats->bytes += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

// A file with fewer blocks than its size has holes: only its data ranges
// are copied (SEEK_DATA/SEEK_HOLE) and the holes stay holes, so a pod's
// terabyte of sparse file is not a terabyte of zeros in the copy (which
// would fill a pool without quotas).
Status CopySparse(int in, int out, uint64_t size, const std::string& what, const Budget& budget) {
  const off_t end = static_cast<off_t>(size);
  for (off_t pos = 0; pos < end;) {
    off_t data = ::lseek(in, pos, SEEK_DATA);
    if (data < 0 && errno == ENXIO) break;  // only a hole is left
    if (data < 0) return Errno("seek data in " + what, errno);
    if (data >= end) break;
    off_t hole = ::lseek(in, data, SEEK_HOLE);
    if (hole < 0) return Errno("seek a hole in " + what, errno);
    NODEVOL_RETURN_IF_ERROR(CopyRange(in, out, data, std::min(hole, end), what, budget));
    pos = hole;
  }
  if (::ftruncate(out, end) != 0) return Errno("truncate " + what, errno);
  return Status::Ok();
}

// Copies the bytes of in to out as they are up to its size when opened
// (st): a reflink when the filesystem can, else the data ranges of a
// sparse file, else copy_file_range (in-kernel), else read/write. Not to
// wherever the file has grown meanwhile: a pod that extends its file
// while it is copied (ftruncate to a terabyte, read back as zeros by
// copy_file_range) would have the copy write what nobody measured.
Status CopyBytes(int in, int out, const struct stat& st, const std::string& what, const Budget& budget) {
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  // A reflink of the file as far as its size when opened (FICLONERANGE;
  // FICLONE would clone whatever it has grown to): shared blocks, nothing
  // written, nothing charged. An unaligned end that is no longer the
  // file's end is refused (EINVAL) and the file copied instead.
  struct file_clone_range range = {};
  range.src_fd = in;
  range.src_length = size;
  if (size > 0 && ::ioctl(out, FICLONERANGE, &range) == 0) {
    ++budget.stats->reflinked;
    budget.stats->bytes += size;
    if (::ftruncate(out, st.st_size) != 0) return Errno("truncate " + what, errno);
    return Status::Ok();
  }
  if (static_cast<uint64_t>(st.st_blocks) * 512 < size) return CopySparse(in, out, size, what, budget);
  return CopyRange(in, out, 0, st.st_size, what, budget);
}

Status CopyFile(int dir, const char* name, int dst, const Budget& budget) {
  TreeCopyStats* stats = budget.stats;
  const std::string what = Quoted(name);
  // The pod owns the tree and may have swapped a FIFO, a device node or a
  // symlink in since the walk's fstatat: only a regular file is opened
  // (fs/open_untrusted.h); anything else is left out.
  UniqueFd in;
  struct stat st;
  // O_NONBLOCK: a lease the pod holds on its file fails the open
  // (EWOULDBLOCK, and the copy) instead of stalling it for lease-break-time.
  Status opened = OpenUntrusted(dir, name, FileType::kRegular, O_RDONLY | O_NONBLOCK, what, &in, &st);
  if (opened.code() == Status::Code::kNotFound || opened.code() == Status::Code::kFailedPrecondition)
    return ++stats->left_out, Status::Ok();
  NODEVOL_RETURN_IF_ERROR(opened);
  NODEVOL_RETURN_IF_ERROR(budget.Entry(name));
  UniqueFd out(::openat(dst, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (out.get() < 0) return Errno("create " + what + " in the copy", errno);
  NODEVOL_RETURN_IF_ERROR(CopyBytes(in.get(), out.get(), st, what, budget));
  NODEVOL_RETURN_IF_ERROR(ApplyMetadata(out.get(), st, what));
  ++stats->files;
  return Status::Ok();
}

Status CopySymlink(int dir, const char* name, const struct stat& st, int dst, const Budget& budget) {
  TreeCopyStats* stats = budget.stats;
  std::vector<char> target(static_cast<size_t>(st.st_size > 0 ? st.st_size : 255) + 1);
  for (;;) {
    ssize_t n = ::readlinkat(dir, name, target.data(), target.size());
    if (n < 0) {
      if (errno == ENOENT || errno == EINVAL) return ++stats->left_out, Status::Ok();  // gone, or no longer a link
      return Errno("readlink " + Quoted(name), errno);
    }
    if (static_cast<size_t>(n) < target.size()) {
      target[static_cast<size_t>(n)] = '\0';
      break;
    }
    if (target.size() > 65536) return Status::InvalidArgument("symlink " + Quoted(name) + " has an oversized target");
    target.resize(target.size() * 2);  // it grew since fstatat
  }
  NODEVOL_RETURN_IF_ERROR(budget.Entry(name));
  NODEVOL_RETURN_IF_ERROR(budget.Charge(SymlinkCost(std::strlen(target.data()), budget.block), Quoted(name)));
  if (::symlinkat(target.data(), dst, name) != 0) return Errno("symlink " + Quoted(name) + " in the copy", errno);
  if (::fchownat(dst, name, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) != 0)
    return Errno("chown symlink " + Quoted(name), errno);
  struct timespec times[2] = {st.st_atim, st.st_mtim};
  if (::utimensat(dst, name, times, AT_SYMLINK_NOFOLLOW) != 0) return Errno("set the times of " + Quoted(name), errno);
  ++stats->symlinks;
  return Status::Ok();
}

Status CopyFifo(const char* name, const struct stat& st, int dst, const Budget& budget) {
  TreeCopyStats* stats = budget.stats;
  NODEVOL_RETURN_IF_ERROR(budget.Entry(name));
  if (::mkfifoat(dst, name, 0600) != 0) return Errno("mkfifo " + Quoted(name) + " in the copy", errno);
  if (::fchownat(dst, name, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) != 0 ||
      ::fchmodat(dst, name, st.st_mode & 07777, 0) != 0)
    return Errno("chown/chmod FIFO " + Quoted(name), errno);
  ++stats->fifos;
  return Status::Ok();
}

}  // namespace

Status CopyTree(int src_fd, int dst_fd, TreeCopyStats* stats, const TreeSize& limit) {
  *stats = TreeCopyStats{};
  // The destination directory being filled: a descriptor of its own that
  // follows the walk down (mkdirat + open) and up (".."). Only nodevold
  // writes there, so its ".." is where the walk came from.
  UniqueFd dst(::openat(dst_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dst.get() < 0) return Errno("open the copy's root", errno);
  uint64_t block = 0;
  NODEVOL_RETURN_IF_ERROR(BlockSize(dst.get(), &block));
  const Budget budget{limit, stats, block};
  TreeWalkOps ops;
  ops.on_entry = [&](int dir, const char* name, const struct stat& st) -> Status {
    if (S_ISREG(st.st_mode)) return CopyFile(dir, name, dst.get(), budget);
    if (S_ISLNK(st.st_mode)) return CopySymlink(dir, name, st, dst.get(), budget);
    if (S_ISFIFO(st.st_mode)) return CopyFifo(name, st, dst.get(), budget);
    ++stats->left_out;  // devices, sockets
    return Status::Ok();
  };
  ops.on_dir_enter = [&](int, const char* name, const struct stat&) -> Status {
    NODEVOL_RETURN_IF_ERROR(budget.Entry(name));
    if (::mkdirat(dst.get(), name, 0700) != 0) return Errno("mkdir " + Quoted(name) + " in the copy", errno);
    int child = ::openat(dst.get(), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (child < 0) return Errno("open " + Quoted(name) + " in the copy", errno);
    dst.reset(child);
    ++stats->dirs;
    return Status::Ok();
  };
  // After a directory's entries (the root's too): its metadata, mtime last.
  ops.on_dir_done = [&](int, const struct stat& st) { return ApplyMetadata(dst.get(), st, "a directory of the copy"); };
  ops.on_child_done = [&](int, const char*) -> Status {
    int parent = ::openat(dst.get(), "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (parent < 0) return Errno("open .. in the copy", errno);
    dst.reset(parent);
    return Status::Ok();
  };
  ops.on_other_mount = [&](int, const char*) {
    ++stats->left_out;
    return Status::Ok();
  };
  return WalkTree(src_fd, ops);
}

Status MeasureTree(int src_fd, TreeSize* size) {
  *size = TreeSize{0, 0};
  uint64_t block = 0;
  NODEVOL_RETURN_IF_ERROR(BlockSize(src_fd, &block));
  TreeWalkOps ops;
  // What CopyTree makes anew and charges (Budget): regular files as
  // allocated (each hard link in full: the copy makes separate files),
  // symlinks' targets, FIFOs, directories, and each entry's cost in its
  // directory.
  ops.on_entry = [&](int, const char* name, const struct stat& st) {
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode) && !S_ISFIFO(st.st_mode)) return Status::Ok();
    uint64_t bytes = static_cast<uint64_t>(st.st_blocks) * 512;
    // A file kept in its inode (ext4 inline_data, btrfs) has no blocks,
    // but the copy charges the block its data takes.
    if (S_ISREG(st.st_mode) && st.st_size > 0) bytes = std::max(bytes, block);
    if (S_ISLNK(st.st_mode)) bytes = std::max(bytes, SymlinkCost(static_cast<uint64_t>(st.st_size), block));
    size->bytes = SaturatingAdd(size->bytes, SaturatingAdd(bytes, EntryCost(name)));
    size->entries = SaturatingAdd(size->entries, 1);
    return Status::Ok();
  };
  ops.on_dir_enter = [&](int, const char* name, const struct stat&) {
    size->bytes = SaturatingAdd(size->bytes, EntryCost(name));
    size->entries = SaturatingAdd(size->entries, 1);
    return Status::Ok();
  };
  ops.on_dir_done = [&](int, const struct stat& st) {
    size->bytes = SaturatingAdd(size->bytes, static_cast<uint64_t>(st.st_blocks) * 512);
    return Status::Ok();
  };
  return WalkTree(src_fd, ops);
}

}  // namespace nodevol
