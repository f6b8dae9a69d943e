// CopySpace: the bytes a dir pool has promised to copies under way
// (snapshots, restores, clones: DirBackend::CopyInto). A copy asks for what
// it will write before its first byte; it gets it only when the pool's
// free space, less what the other copies may still write, holds it, so
// that two copies started together cannot each pass a check the pool can
// satisfy only once. The promise is held until the copy ends, and the free
// space the pool reports leaves it out. What a copy has already written is
// then counted twice (in the free space and in its promise): that errs on
// the side of refusing.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "base/status.h"

namespace nodevol {

class CopySpace {
 public:
  // A promise of bytes, given back when destroyed.
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
    uint64_t bytes_ = 0;
  };

  // Promises `need` bytes into *hold (which must hold nothing) when
  // need + what is promised <= free; RESOURCE_EXHAUSTED naming `what`
  // (the copy) and `pool` otherwise, with nothing promised.
  Status Reserve(uint64_t need, uint64_t free, const std::string& what, const std::string& pool, Hold* hold);
  // What the copies under way may still write.
  uint64_t promised();

 private:
  std::mutex mu_;
  uint64_t promised_ = 0;
};

}  // namespace nodevol
