// The kernel's mount table (/proc/self/mountinfo) as both readers load it
// (mountd/mount/mount_table.h, mountd/backend/nfs/mountinfo.h). Mount
// points come from what pods and NFS servers name, so any bytes.
#include "backend/nfs/mountinfo.h"
#include "mount/mount_table.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nodevol::fuzz::MemFile file(data, size);
  nodevol::MountTable table;
  if (table.Load(file.path()).ok())
    for (const auto& e : table.entries()) {
      FUZZ_CHECK(table.FindTarget(e.target) != nullptr, "a loaded mount point is not found again");
      (void)table.Below(e.target);
    }
  std::vector<nodevol::MountInfo> mounts;
  if (nodevol::LoadMountInfo(&mounts, file.path()).ok())
    for (const auto& m : mounts) FUZZ_CHECK(nodevol::FindMount(mounts, m.target) != nullptr, "a mount not found again");
  return 0;
}
