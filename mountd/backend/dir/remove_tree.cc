#include "backend/dir/remove_tree.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "base/unique_fd.h"
#include "fs/tree_walk.h"
#include "mount/mount_table.h"

namespace nodevol {

Status CheckNoMountsIn(const std::vector<std::string>& dirs) {
  MountTable table;
  NODEVOL_RETURN_IF_ERROR(table.Load());
  for (const std::string& dir : dirs) {
    std::vector<const MountEntry*> inside = table.Below(dir);
    if (const MountEntry* self = table.FindTarget(dir)) inside.push_back(self);
    if (!inside.empty())
      return Status::FailedPrecondition("cannot delete " + dir + ": " + inside.front()->target +
                                        " is a mount point; unmount it first");
  }
  return Status::Ok();
}

Status RemoveTree(const std::string& parent_dir, const std::string& name, const std::function<void()>& step) {
  UniqueFd parent(::open(parent_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (parent.get() < 0) return Status::FromErrno("open " + parent_dir, errno);
  const std::string what = "remove " + parent_dir + "/" + name;
  UniqueFd root(::openat(parent.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (root.get() < 0) return errno == ENOENT ? Status::Ok() : Status::FromErrno(what, errno);
  TreeWalkOps ops;
  ops.rescan_after_removal = true;
  ops.on_entry = [&step](int dir, const char* entry, const struct stat&) {
    if (::unlinkat(dir, entry, 0) != 0 && errno != ENOENT)
      return Status::FromErrno(std::string("unlink \"") + entry + "\"", errno);
    if (step) step();
    return Status::Ok();
  };
  ops.on_child_done = [&step](int dir, const char* entry) {
    if (!entry) return Status::Ok();  // moved meanwhile: the rescan finds it
    if (::unlinkat(dir, entry, AT_REMOVEDIR) != 0 && errno != ENOENT)
      return Status::FromErrno(std::string("rmdir \"") + entry + "\"", errno);
    if (step) step();
    return Status::Ok();
  };
  ops.on_other_mount = [](int, const char* entry) {
    return Status::FailedPrecondition(std::string("\"") + entry + "\" is a mount point; unmount it first");
  };
  NODEVOL_RETURN_IF_ERROR(WalkTree(root.get(), ops).WithContext(what));
  if (::unlinkat(parent.get(), name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) return Status::FromErrno(what, errno);
  return Status::Ok();
}

}  // namespace nodevol
