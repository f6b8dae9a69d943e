#include "backend/dir/copy_space.h"

namespace nodevol {

void CopySpace::Hold::Release() {
  if (!space_) return;
  std::lock_guard<std::mutex> lock(space_->mu_);
  space_->promised_ -= bytes_;
  space_ = nullptr;
  bytes_ = 0;
}

Status CopySpace::Reserve(uint64_t need, uint64_t free, const std::string& what, const std::string& pool,
                          Hold* hold) {
  std::lock_guard<std::mutex> lock(mu_);
  if (need > free || free - need < promised_)
    return Status::ResourceExhausted(what + " takes " + std::to_string(need) + " bytes as a copy and pool " + pool +
                                     " has " + std::to_string(free) + " bytes free, " + std::to_string(promised_) +
                                     " of them promised to copies under way: no room for the copy");
  promised_ += need;
  hold->space_ = this;
  hold->bytes_ = need;
  return Status::Ok();
}

uint64_t CopySpace::promised() {
  std::lock_guard<std::mutex> lock(mu_);
  return promised_;
}

}  // namespace nodevol
