// GivenUp: claims the workers gave up on (a permanent error, or 15
// failures), with the resourceVersion they had. The informer's periodic
// resync redelivers every claim unchanged; such a claim must stay given up
// until it or its class really changes (docs/provisioner.md: no retry
// storm for a bad parameter). Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <string>

namespace nodevol::provisioner {

class GivenUp {
 public:
  void Add(const std::string& key, const std::string& resource_version) {
    std::lock_guard<std::mutex> lock(mu_);
    keys_[key] = resource_version;
  }
  // Whether a notification of `key` at `resource_version` should queue it:
  // not while it is given up at that same version; a new version ends it.
  bool ShouldQueue(const std::string& key, const std::string& resource_version) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = keys_.find(key);
    if (it == keys_.end()) return true;
    if (it->second == resource_version) return false;
    keys_.erase(it);
    return true;
  }
  bool Contains(const std::string& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    return keys_.count(key) != 0;
  }
  void Remove(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    keys_.erase(key);
  }
  // A class changed: everyone gets another pass.
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    keys_.clear();
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::string> keys_;
};

}  // namespace nodevol::provisioner
