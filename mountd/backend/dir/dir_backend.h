// DirBackend: each volume is a directory <pool path>/<volume name>.
//
// Pool options: path=<dir> (must exist), quota=auto|off|required (project
// quotas, see project_quota.h). Volume parameters: mode (octal, default
// 0777 so pods of any uid can write, like hostPath provisioners), uid, gid.
// Without quota enforcement the size is recorded but not enforced, and the
// pool's free space is shared by all its volumes.
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "backend/backend.h"

namespace nodevol {

class DirBackend : public Backend {
 public:
  // Builds a pool from its options; INVALID_ARGUMENT names a bad option.
  static Status Make(const std::string& pool, const Params& options, std::unique_ptr<Backend>* out);

  std::string kind() const override { return "dir"; }
  std::vector<std::string> fs_types() const override { return {""}; }
  bool size_enforced() const override { return quota_; }
  Params attributes() const override;

  Status Validate(const VolumeSpec& spec) const override;
  Status Create(VolumeRecord* record) override;
  Status Delete(const VolumeRecord& record) override;
  Status Expand(VolumeRecord* record, uint64_t new_size) override;
  Status Stage(const VolumeRecord& record, std::string* path) override;
  Status Unstage(const VolumeRecord& record) override { return Status::Ok(); }
  Status Check(const VolumeRecord& record) override;
  Status GetCapacity(Capacity* out) override;

 private:
  DirBackend(std::string pool, std::string path, bool quota);
  std::string VolumeDir(const std::string& name) const { return path_ + "/" + name; }
  Status ApplyQuota(VolumeRecord* record, uint64_t bytes);

  std::string pool_;
  std::string path_;  // resolved
  bool quota_;
};

}  // namespace nodevol
