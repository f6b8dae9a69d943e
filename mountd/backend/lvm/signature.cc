// ProbeSignature (disks.h): whether a block device is blank, asked of
// libblkid (superblocks and partition tables, read-only) and of sysfs (the
// kernel's partitions of the disk, and holders such as device-mapper).
#include <blkid/blkid.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "backend/lvm/disks.h"

namespace nodevol {
namespace {

// Entries of a sysfs directory (sorted), optionally only those that are
// directories holding `marker` (partitions have a "partition" file).
std::vector<std::string> SysfsEntries(const std::string& dir, const char* marker) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    struct stat st {};
    if (marker && stat((dir + "/" + e->d_name + "/" + marker).c_str(), &st) != 0) continue;
    out.push_back(e->d_name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : " ") + s;
  return out;
}

std::string SuperblockText(const std::string& type, const std::string& usage) {
  if (type == "LVM2_member") return "LVM2_member (LVM physical volume)";
  if (usage == "filesystem") return type + " filesystem";
  if (usage == "raid") return type + " (RAID or volume manager member)";
  if (usage == "crypto") return type + " (encrypted volume)";
  if (type == "swap") return "swap area";
  return type + " signature";
}

}  // namespace

Status ProbeSignature(const std::string& devnode, std::string* what) {
  what->clear();
  std::vector<std::string> found;

  // libblkid opens the device O_RDONLY and never writes.
  blkid_probe pr = blkid_new_probe_from_filename(devnode.c_str());
  if (!pr) return Status::FromErrno("cannot open " + devnode + " to look for signatures", errno);
  blkid_probe_enable_superblocks(pr, 1);
  blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_USAGE);
  blkid_probe_enable_partitions(pr, 1);
  int rc = blkid_do_safeprobe(pr);
  if (rc == 0) {
    const char* type = nullptr;
    const char* usage = nullptr;
    if (blkid_probe_lookup_value(pr, "TYPE", &type, nullptr) == 0 && type) {
      if (blkid_probe_lookup_value(pr, "USAGE", &usage, nullptr) != 0) usage = nullptr;
      found.push_back(SuperblockText(type, usage ? usage : ""));
    }
    if (blkid_probe_lookup_value(pr, "PTTYPE", &type, nullptr) == 0 && type)
      found.push_back(std::string(type) + " partition table");
    if (found.empty()) found.push_back("an unnamed signature");
  } else if (rc == -2) {
    found.push_back("several conflicting signatures");
  }
  blkid_free_probe(pr);
  if (rc == -1) return Status::Internal("libblkid could not probe " + devnode + " for signatures");

  // What the kernel knows: partitions (even with the table since wiped)
  // and holders (device-mapper, md) using the device.
  struct stat st {};
  if (stat(devnode.c_str(), &st) == 0 && S_ISBLK(st.st_mode)) {
    std::string sys = "/sys/dev/block/" + std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev));
    if (auto parts = SysfsEntries(sys, "partition"); !parts.empty()) found.push_back("partitions " + Join(parts));
    if (auto holders = SysfsEntries(sys + "/holders", nullptr); !holders.empty())
      found.push_back("in use by " + Join(holders));
  }
  for (const auto& f : found) *what += (what->empty() ? "" : ", ") + f;
  return Status::Ok();
}

}  // namespace nodevol
