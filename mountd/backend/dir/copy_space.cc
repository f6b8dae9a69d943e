#include "backend/dir/copy_space.h"

#include <map>
#include <memory>

namespace nodevol {

CopySpace& CopySpace::ForFilesystem(dev_t dev) {
  static std::mutex mu;
  // Never destroyed: a copy thread may give its promise back while the
  // process exits.
  static auto* spaces = new std::map<dev_t, std::unique_ptr<CopySpace>>;
  std::lock_guard<std::mutex> lock(mu);
  auto& space = (*spaces)[dev];
  if (!space) space = std::make_unique<CopySpace>();
  return *space;
}

void CopySpace::Hold::Release() {
  if (!space_) return;
  std::lock_guard<std::mutex> lock(space_->mu_);
  space_->promised_.bytes -= size_.bytes;
  space_->promised_.entries -= size_.entries;
  space_ = nullptr;
  size_ = TreeSize{0, 0};
}

Status CopySpace::Reserve(const TreeSize& need, const TreeSize& free, const std::string& what,
                          const std::string& pool, Hold* hold) {
  std::lock_guard<std::mutex> lock(mu_);
  if (need.bytes > free.bytes || free.bytes - need.bytes < promised_.bytes)
    return Status::ResourceExhausted(what + " takes " + std::to_string(need.bytes) + " bytes as a copy and pool " +
                                     pool + "'s filesystem has " + std::to_string(free.bytes) + " bytes free, " +
                                     std::to_string(promised_.bytes) +
                                     " of them promised to copies under way: no room for the copy");
  if (need.entries > free.entries || free.entries - need.entries < promised_.entries)
    return Status::ResourceExhausted(what + " takes " + std::to_string(need.entries) + " inodes as a copy and pool " +
                                     pool + "'s filesystem has " + std::to_string(free.entries) + " free, " +
                                     std::to_string(promised_.entries) +
                                     " of them promised to copies under way: no room for the copy");
  promised_.bytes += need.bytes;
  promised_.entries += need.entries;
  hold->space_ = this;
  hold->size_ = need;
  return Status::Ok();
}

uint64_t CopySpace::promised() {
  std::lock_guard<std::mutex> lock(mu_);
  return promised_.bytes;
}

}  // namespace nodevol
