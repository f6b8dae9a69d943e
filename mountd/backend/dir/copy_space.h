// CopySpace: what the copies under way on one filesystem (dir pools'
// snapshots, restores, clones: DirBackend::CopyInto) have been promised:
// bytes and entries (inodes). A copy asks for what it measured before its
// first byte; it gets it only when the filesystem's free space (and free
// inodes), less what the other copies may still take, holds it, so that
// two copies started together cannot each pass a check the filesystem can
// satisfy only once. There is one CopySpace per filesystem, not per pool:
// pools that share a filesystem share its free space. The promise is held
// until the copy ends, and the free space a pool reports leaves it out.
// What a copy has already written is then counted twice (in the free
// space and in its promise): that errs on the side of refusing. The copy
// itself is held to what it was promised (fs/tree_copy.h, its budget).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <string>

#include "base/status.h"
#include "fs/tree_copy.h"

namespace nodevol {

class CopySpace {
 public:
  // The CopySpace of the filesystem whose st_dev is `dev`; lives as long as
  // the process.
  static CopySpace& ForFilesystem(dev_t dev);

  // A promise, given back when destroyed.
  class Hold {
   public:
    Hold() = default;
    ~Hold() { Release(); }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    void Release();

   private:
    friend class CopySpace;
    CopySpace* space_ = nullptr;
    TreeSize size_{0, 0};
  };

  // Promises `need` into *hold (which must hold nothing) when need plus
  // what is promised fits in `free`, bytes and entries alike;
  // RESOURCE_EXHAUSTED naming `what` (the copy) and `pool` otherwise, with
  // nothing promised.
  Status Reserve(const TreeSize& need, const TreeSize& free, const std::string& what, const std::string& pool,
                 Hold* hold);
  // What the copies under way may still write, in bytes.
  uint64_t promised();

 private:
  std::mutex mu_;
  TreeSize promised_{0, 0};
};

}  // namespace nodevol
