// CopyTree: copies a directory tree a pod may be changing into a directory
// only nodevold writes (a dir pool's snapshot, restore or clone), by
// descriptors only, as WalkTree (fs/tree_walk.h) walks it.
//
// - The source is read by WalkTree: no symlink is ever followed, nothing
//   on another mount is entered, one source directory is open at a time.
//   Every file is opened O_NOFOLLOW|O_NONBLOCK and checked to be the
//   regular file fstatat saw (a FIFO or device swapped in is not read).
// - Regular files: FICLONE (a reflink, where the filesystem shares blocks),
//   else copy_file_range, else read/write; of a sparse file only its data
//   ranges (SEEK_DATA/SEEK_HOLE): holes stay holes. Symlinks are copied as links
//   (their target text, never resolved); directories and FIFOs are made
//   anew; devices and sockets are left out (counted). Hard links become
//   separate files. Extended attributes are not copied.
// - Owner, mode (setuid and setgid bits included: the copy is mounted
//   nosuid like its source) and times follow the source; a directory's
//   after its entries, so its mtime is the source's.
// - The destination must be an empty directory; what is made in it is new
//   (O_EXCL, mkdirat): an entry already there is an error, never replaced.
//   On any error the copy is left as far as it got: the caller removes it.
// A source moved under the walk so that ".." is no longer where the walk
// came from ends the copy with ABORTED; a full destination (quota) with
// RESOURCE_EXHAUSTED.
//
// A pod may write while its tree is copied. A regular file is copied as
// far as its size when opened (growth after that is later than the copy),
// and a caller that measured the tree first (MeasureTree) passes what it
// measured as the copy's budget: a copy that would write more data bytes,
// or make more entries, than that ends with ABORTED ("the source grew
// while it was copied") before it writes them. So what the copy takes is
// bounded by what was checked and reserved for it, not by what the pod
// adds meanwhile: more hard links, a file extended, new files.
#pragma once

#include <cstdint>
#include <limits>

#include "base/status.h"

namespace nodevol {

struct TreeCopyStats {
  uint64_t files = 0, dirs = 0, symlinks = 0, fifos = 0;
  uint64_t bytes = 0;        // of regular files
  uint64_t reflinked = 0;    // files shared by FICLONE rather than copied
  uint64_t left_out = 0;     // devices, sockets, other mounts, entries gone meanwhile
  uint64_t written = 0;      // data bytes written (not reflinked), against the budget
};

// What a copy of a tree takes, as MeasureTree reads it, and a CopyTree's
// budget. A reflinked file writes nothing and is not charged.
struct TreeSize {
  uint64_t bytes = std::numeric_limits<uint64_t>::max();    // data bytes written
  uint64_t entries = std::numeric_limits<uint64_t>::max();  // files, directories, symlinks, FIFOs made
};

// Copies the tree open at src_fd (a directory) into the empty directory
// open at dst_fd, the root's own metadata included, within `budget`.
Status CopyTree(int src_fd, int dst_fd, TreeCopyStats* stats, const TreeSize& budget = TreeSize{});

// What a CopyTree of the tree open at src_fd would take, as the source's
// entries are now: bytes as allocated (every hard link in full, since the
// copy makes separate files; holes left out; at least the size of a file
// shorter than a block, which some filesystems keep in its inode), and
// the entries it would make, directories included. Devices, sockets and
// other mounts are not counted. Walks the tree as CopyTree does, reading
// no data. Sums saturate (a tree of more than 2^64 bytes is "too big",
// never a small number).
Status MeasureTree(int src_fd, TreeSize* size);

}  // namespace nodevol
