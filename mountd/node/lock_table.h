// LockTable: one mutex per key (a volume name, a target path), created on
// first use and dropped when nobody holds or waits for it, so operations on
// different volumes and pods never wait for each other.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

namespace nodevol {

// Lock keys: volumes and targets live in one table under distinct prefixes.
inline std::string VolumeKey(const std::string& name) { return "volume:" + name; }
inline std::string TargetKey(const std::string& path) { return "target:" + path; }
inline std::string SnapshotKey(const std::string& name) { return "snapshot:" + name; }

class LockTable {
 public:
  class Guard {
   public:
    Guard(LockTable* t, std::string key) : t_(t), key_(std::move(key)) { t_->Lock(key_); }
    ~Guard() { t_->Unlock(key_); }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    LockTable* t_;
    std::string key_;
  };

  // How many callers are blocked in Lock(key) right now: lets a test see
  // that a second locker really waits, without sleeping.
  int Waiting(const std::string& key) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = entries_.find(key);
    return it == entries_.end() ? 0 : it->second.waiters;
  }

 private:
  struct Entry {
    bool held = false;
    int waiters = 0;
  };

  void Lock(const std::string& key) {
    std::unique_lock<std::mutex> l(mu_);
    Entry& e = entries_[key];
    ++e.waiters;
    cv_.wait(l, [&] { return !e.held; });
    --e.waiters;
    e.held = true;
  }
  void Unlock(const std::string& key) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = entries_.find(key);
    it->second.held = false;
    if (it->second.waiters == 0) entries_.erase(it);
    cv_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Entry> entries_;  // std::map: references stay valid
};

}  // namespace nodevol
