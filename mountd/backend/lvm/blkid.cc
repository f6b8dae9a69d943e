#include "backend/lvm/blkid.h"

#include <blkid/blkid.h>

#include <cerrno>
#include <string_view>

namespace nodevol {

Status ProbeBlkid(const std::string& device, BlkidFindings* out) {
  *out = BlkidFindings{};
  blkid_probe pr = blkid_new_probe_from_filename(device.c_str());
  if (!pr) return Status::FromErrno("cannot open " + device + " to look for signatures", errno);
  blkid_probe_enable_superblocks(pr, 1);
  blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_USAGE);
  blkid_probe_enable_partitions(pr, 1);
  blkid_probe_set_partitions_flags(pr, BLKID_PARTS_FORCE_GPT | BLKID_PARTS_ENTRY_DETAILS);
  int rc = blkid_do_safeprobe(pr);
  auto value = [&](const char* name) {
    const char* v = nullptr;
    return blkid_probe_lookup_value(pr, name, &v, nullptr) == 0 && v ? std::string(v) : std::string();
  };
  if (rc == 0) {
    // A partition's own entry (PART_ENTRY_*) is no signature on it.
    int n = blkid_probe_numof_values(pr);
    for (int i = 0; i < n; ++i) {
      const char* name = nullptr;
      if (blkid_probe_get_value(pr, i, &name, nullptr, nullptr) == 0 && name &&
          std::string_view(name).rfind("PART_ENTRY_", 0) != 0)
        out->found = true;
    }
    out->part_entry_type = value("PART_ENTRY_TYPE");
    out->part_entry_scheme = value("PART_ENTRY_SCHEME");
    out->type = value("TYPE");
    if (!out->type.empty()) out->usage = value("USAGE");
    out->pttype = value("PTTYPE");
  } else if (rc == -2) {
    out->found = out->conflicting = true;
  }
  blkid_free_probe(pr);
  if (rc == -1) return Status::Internal("libblkid could not probe " + device + " for signatures");
  return Status::Ok();
}

}  // namespace nodevol
