// ProbeSignature (disks.h): whether a block device is blank, asked of
// libblkid (superblocks and partition tables, read-only: blkid.h) and of
// sysfs (the kernel's partitions of the disk, and holders such as
// device-mapper).
#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

#include "backend/lvm/blkid.h"
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

// Partition types that say "free for Linux to use": Linux LVM and Linux
// filesystem data, GPT and MBR. Anything else (ZFS, swap, RAID, Windows,
// EFI, a vendor's) belongs to something, even with no signature inside.
bool FreeLinuxPartitionType(std::string type) {
  for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return type == "e6d6d379-f507-44c2-a23c-238f2a3df928" || type == "0fc63daf-8483-4772-8e79-3d69d8477de4" ||
         type == "0x8e" || type == "0x83";
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

  BlkidFindings b;
  NODEVOL_RETURN_IF_ERROR(ProbeBlkid(devnode, &b));
  if (!b.type.empty()) found.push_back(SuperblockText(b.type, b.usage));
  if (!b.pttype.empty()) found.push_back(b.pttype + " partition table");
  if (b.conflicting) found.push_back("several conflicting signatures");
  else if (b.found && found.empty()) found.push_back("an unnamed signature");
  if (!b.part_entry_type.empty() && !FreeLinuxPartitionType(b.part_entry_type))
    found.push_back("partition type " + b.part_entry_type + " (" + b.part_entry_scheme +
                    "; only Linux LVM or Linux filesystem partitions are used)");

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
