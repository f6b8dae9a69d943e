#include "backend/nfs/mountinfo.h"

#include <libmount/libmount.h>

#include <memory>

namespace nodevol {

Status LoadMountInfo(std::vector<MountInfo>* out, const std::string& path) {
  std::unique_ptr<libmnt_table, decltype(&mnt_unref_table)> tb(mnt_new_table(), &mnt_unref_table);
  if (!tb) return Status::Internal("libmount: cannot allocate a table");
  int rc = mnt_table_parse_file(tb.get(), path.c_str());
  if (rc != 0) return Status::FromErrno("libmount: parse " + path, -rc);
  std::unique_ptr<libmnt_iter, decltype(&mnt_free_iter)> it(mnt_new_iter(MNT_ITER_FORWARD), &mnt_free_iter);
  out->clear();
  libmnt_fs* fs = nullptr;
  auto str = [](const char* s) { return std::string(s ? s : ""); };
  while (mnt_table_next_fs(tb.get(), it.get(), &fs) == 0) {
    MountInfo m;
    m.target = str(mnt_fs_get_target(fs));
    m.source = str(mnt_fs_get_source(fs));
    m.fstype = str(mnt_fs_get_fstype(fs));
    m.options = str(mnt_fs_get_options(fs));
    m.dev = mnt_fs_get_devno(fs);
    out->push_back(std::move(m));
  }
  return Status::Ok();
}

const MountInfo* FindMount(const std::vector<MountInfo>& mounts, const std::string& target) {
  for (auto it = mounts.rbegin(); it != mounts.rend(); ++it)
    if (it->target == target) return &*it;
  return nullptr;
}

}  // namespace nodevol
