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
#pragma once

#include <cstdint>

#include "base/status.h"

namespace nodevol {

struct TreeCopyStats {
  uint64_t files = 0, dirs = 0, symlinks = 0, fifos = 0;
  uint64_t bytes = 0;        // of regular files
  uint64_t reflinked = 0;    // files shared by FICLONE rather than copied
  uint64_t left_out = 0;     // devices, sockets, other mounts, entries gone meanwhile
};

// Copies the tree open at src_fd (a directory) into the empty directory
// open at dst_fd, the root's own metadata included.
Status CopyTree(int src_fd, int dst_fd, TreeCopyStats* stats);

// The bytes a CopyTree of the tree open at src_fd would allocate, as the
// source's entries are allocated now: every hard link counted in full,
// holes left out, devices, sockets and other mounts not counted. Walks the
// tree as CopyTree does, reading no data. (A pod writing meanwhile can make
// the copy larger: a caller that must bound it sets a limit, a quota.)
Status MeasureTree(int src_fd, uint64_t* bytes);

}  // namespace nodevol
