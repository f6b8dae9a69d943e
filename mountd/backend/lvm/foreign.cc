#include "backend/lvm/foreign.h"

#include <cstring>

namespace nodevol {
namespace {

bool Contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// Kernel names of virtual block devices, for a clearer reason than
// "virtual" (they all live under /sys/devices/virtual/block as well).
const char* VirtualKind(const std::string& sysname) {
  static const char* const kNames[][2] = {
      {"rbd", "Ceph RBD"},         {"nbd", "network block device"}, {"drbd", "DRBD"},
      {"md", "software RAID"},     {"zd", "ZFS zvol"},              {"bcache", "bcache"},
      {"dm-", "device-mapper"},    {"loop", "loop"},                {"nullb", "null_blk"},
      {"ublk", "userspace block"}, {"zram", "zram"},                {"ram", "RAM disk"},
  };
  for (const auto& [prefix, kind] : kNames)
    if (sysname.compare(0, std::strlen(prefix), prefix) == 0) return kind;
  return nullptr;
}

}  // namespace

std::string ForeignReason(const DeviceFacts& f) {
  const char* kind = VirtualKind(f.sysname);
  if (Contains(f.syspath, "/devices/virtual/") || kind)
    return std::string("a virtual block device (") + (kind ? kind : f.sysname.c_str()) + ")";
  if (f.multipath_path) return "a path of a multipath device";
  // iSCSI sessions and FC remote ports appear in the device's sysfs path.
  if (Contains(f.syspath, "/session") || Contains(f.id_path, "-iscsi-")) return "an iSCSI LUN";
  if (Contains(f.syspath, "/rport-") || Contains(f.id_path, "-fc-")) return "a Fibre Channel LUN";
  if (!f.nvme_transport.empty() && f.nvme_transport != "pcie")
    return "an NVMe namespace over " + f.nvme_transport + " (NVMe-oF)";
  return "";
}

}  // namespace nodevol
