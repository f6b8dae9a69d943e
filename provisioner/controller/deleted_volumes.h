// DeletedVolumes: PVs (by uid) whose volume this process has deleted on
// its node while the rest of the delete (the PV object, its finalizer) is
// still to succeed. A pass retried after a failed API call (a 500) then
// finishes the PV without asking the node again: one DeleteVolume per PV.
// Memory only: after a restart or a leader change the next pass asks the
// node once more, which DeleteVolume answers as "was gone". Thread-safe.
#pragma once

#include <mutex>
#include <string>
#include <unordered_set>

namespace nodevol::provisioner {

class DeletedVolumes {
 public:
  void Add(const std::string& pv_uid) {
    std::lock_guard<std::mutex> lock(mu_);
    uids_.insert(pv_uid);
  }
  // Once the PV is finished (or gone).
  void Remove(const std::string& pv_uid) {
    std::lock_guard<std::mutex> lock(mu_);
    uids_.erase(pv_uid);
  }
  bool Contains(const std::string& pv_uid) const {
    std::lock_guard<std::mutex> lock(mu_);
    return uids_.count(pv_uid) > 0;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_set<std::string> uids_;
};

}  // namespace nodevol::provisioner
