// InFlight: the volumes a provisioning pass of this process is working on
// right now (between its first look and its PV saved or given up). The
// orphan sweep skips them: a volume made a moment ago whose PV is still
// being saved is no orphan, however its claim and the cache look meanwhile.
// Thread-safe.
#pragma once

#include <mutex>
#include <map>
#include <string>

namespace nodevol::provisioner {

class InFlight {
 public:
  // Marks `volume` in flight for this object's lifetime (null: no-op).
  class Scope {
   public:
    Scope(InFlight* in, std::string volume) : in_(in), volume_(std::move(volume)) {
      if (in_) in_->Add(volume_);
    }
    ~Scope() {
      if (in_) in_->Remove(volume_);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    InFlight* in_;
    std::string volume_;
  };

  bool Contains(const std::string& volume) const {
    std::lock_guard<std::mutex> lock(mu_);
    return volumes_.count(volume) > 0;
  }

 private:
  void Add(const std::string& v) {
    std::lock_guard<std::mutex> lock(mu_);
    ++volumes_[v];
  }
  void Remove(const std::string& v) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = volumes_.find(v); it != volumes_.end() && --it->second == 0) volumes_.erase(it);
  }

  mutable std::mutex mu_;
  std::map<std::string, int> volumes_;  // a count: two passes may overlap across a requeue
};

}  // namespace nodevol::provisioner
