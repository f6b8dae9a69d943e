#include "mount/mount_table.h"

#include <libmount/libmount.h>

#include <memory>

namespace nodevol {
namespace {

std::string Str(const char* s) { return s ? s : ""; }

}  // namespace

Status MountTable::Load(const std::string& path) {
  std::unique_ptr<libmnt_table, decltype(&mnt_unref_table)> tb(mnt_new_table(), &mnt_unref_table);
  if (!tb) return Status::Internal("libmount: cannot allocate a table");
  int rc = mnt_table_parse_file(tb.get(), path.c_str());
  if (rc != 0) return Status::FromErrno("libmount: parse " + path, -rc);
  std::unique_ptr<libmnt_iter, decltype(&mnt_free_iter)> it(mnt_new_iter(MNT_ITER_FORWARD), &mnt_free_iter);
  entries_.clear();
  libmnt_fs* fs = nullptr;
  while (mnt_table_next_fs(tb.get(), it.get(), &fs) == 0) {
    MountEntry e;
    e.id = mnt_fs_get_id(fs);
    e.parent_id = mnt_fs_get_parent_id(fs);
    e.target = Str(mnt_fs_get_target(fs));
    e.source = Str(mnt_fs_get_source(fs));
    e.fstype = Str(mnt_fs_get_fstype(fs));
    e.root = Str(mnt_fs_get_root(fs));
    e.options = Str(mnt_fs_get_options(fs));
    entries_.push_back(std::move(e));
  }
  return Status::Ok();
}

const MountEntry* MountTable::FindTarget(const std::string& path) const {
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it)
    if (it->target == path) return &*it;
  return nullptr;
}

std::vector<const MountEntry*> MountTable::Below(const std::string& dir) const {
  std::string prefix = dir + "/";
  std::vector<const MountEntry*> out;
  for (const MountEntry& e : entries_)
    if (e.target.compare(0, prefix.size(), prefix) == 0) out.push_back(&e);
  return out;
}

}  // namespace nodevol
