// Publications: the node's publication records in memory, by target, with
// an index by volume, so that "where is this volume published" is a lookup
// and not a scan of every publication (ListVolumes asks it per volume,
// reconcile per volume, Delete and Unpublish per call). Not thread-safe:
// Node guards it with its mu_.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "node/volume.h"

namespace nodevol {

class Publications {
 public:
  using Map = std::map<std::string, PublicationRecord>;  // by resolved target

  // Adds p, or replaces the record of p.target.
  void Put(const PublicationRecord& p) {
    auto it = by_target_.find(p.target);
    if (it != by_target_.end()) Unindex(it->second);
    by_target_[p.target] = p;
    by_volume_[p.volume].insert(p.target);
  }
  void Erase(const std::string& target) {
    auto it = by_target_.find(target);
    if (it == by_target_.end()) return;
    Unindex(it->second);
    by_target_.erase(it);
  }
  const PublicationRecord* Find(const std::string& target) const {
    auto it = by_target_.find(target);
    return it == by_target_.end() ? nullptr : &it->second;
  }
  // The targets volume is published at, sorted.
  std::vector<std::string> TargetsOf(const std::string& volume) const {
    auto it = by_volume_.find(volume);
    return it == by_volume_.end() ? std::vector<std::string>{}
                                  : std::vector<std::string>(it->second.begin(), it->second.end());
  }
  Map::const_iterator begin() const { return by_target_.begin(); }
  Map::const_iterator end() const { return by_target_.end(); }
  size_t size() const { return by_target_.size(); }

 private:
  void Unindex(const PublicationRecord& p) {
    auto v = by_volume_.find(p.volume);
    if (v == by_volume_.end()) return;
    v->second.erase(p.target);
    if (v->second.empty()) by_volume_.erase(v);
  }

  Map by_target_;
  std::map<std::string, std::set<std::string>> by_volume_;
};

}  // namespace nodevol
