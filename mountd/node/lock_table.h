// LockTable: one mutex per key (a volume name, a target path), created on
// first use and dropped when nobody holds or waits for it, so operations on
// different volumes and pods never wait for each other.
//
// A wait ends at the deadline of the call the thread serves (CallScope):
// an operation stuck on a disk that stopped answering holds its key for as
// long as the disk is gone, and every retry kubelet makes would otherwise
// park one more thread (and a flex door connection) behind it, for ever.
// Past the deadline the Guard holds nothing and says why, naming the call
// that holds the key and for how long.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "base/status.h"

namespace nodevol {

// Lock keys: volumes, targets and snapshots live in one table under
// distinct prefixes, which also read well in a message.
inline std::string VolumeKey(const std::string& name) { return "volume " + name; }
inline std::string TargetKey(const std::string& path) { return "target " + path; }
inline std::string SnapshotKey(const std::string& name) { return "snapshot " + name; }

class LockTable {
 public:
  class Guard {
   public:
    // Waits for the key until the calling thread's CallScope deadline.
    Guard(LockTable* t, std::string key) : t_(t), key_(std::move(key)) { status_ = t_->Lock(key_); }
    ~Guard() {
      if (status_.ok()) t_->Unlock(key_);
    }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    // OK when held; else DEADLINE_EXCEEDED naming the key and its holder.
    const Status& status() const { return status_; }

   private:
    LockTable* t_;
    std::string key_;
    Status status_;
  };

  // How many callers are blocked in Lock(key) right now: lets a test see
  // that a second locker really waits, without sleeping.
  int Waiting(const std::string& key);

 private:
  struct Entry {
    bool held = false;
    int waiters = 0;
    std::string holder;  // CallScope::What() of the holder
    std::chrono::steady_clock::time_point since;
  };

  Status Lock(const std::string& key);
  void Unlock(const std::string& key);

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Entry> entries_;  // std::map: references stay valid
};

}  // namespace nodevol
