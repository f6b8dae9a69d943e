// Disk selection for LVM pools: which block devices a pool's volume group
// may be built from, and the volume group set up from them.
//
// Devices are chosen by explicit paths or globs (/dev/disk/by-id/nvme-*) or
// by match rules evaluated against libudev (model, serial, size range,
// rotational). Safety rules (docs/lvm.md, "what is never touched"):
// - a device that carries any signature libblkid recognizes (filesystem,
//   partition table, RAID member, LVM label of another VG, swap, ...) is
//   never touched unless force= names it by /dev/disk/by-id path together
//   with that very signature;
// - devices of other drivers or machines (foreign.h) only when devices=
//   names them by exact /dev/disk/by-id path;
// - partitions only when devices= names them exactly (no glob, no match-*
//   rule) and their partition type is Linux LVM or Linux data;
// - a VG is extended only if it carries kManagedTag, and only with disks
//   pinned by serial (match-serial=) or an exact by-id path: rules that
//   pin nothing (size, model, rotational, kernel names) only create it.
// Every decision, taken or not, carries a reason that is logged.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend/lvm/lvm.h"
#include "base/status.h"
#include "node/volume.h"

namespace nodevol {

// A pool's disk selection, from its options:
//   devices=PATH|GLOB ...       space-separated; explicit devices or globs
//   match-model=GLOB            fnmatch on the device model
//   match-serial=GLOB           fnmatch on the serial
//   match-size=MIN-MAX          e.g. 10G-2T, 100G-, -500G (sizes as in ParseSize)
//   match-rotational=0|1
//   force=BYID:SIGNATURE ...    /dev/disk/by-id/X:ext4: X taken although it
//                               carries that signature (and no other)
// A whole disk is a candidate when it is named by `devices` or, when any
// match-* rule is set, when it passes every match-* rule; a partition only
// when `devices` names it exactly. Read-only devices never are.
struct DiskRules {
  std::vector<std::string> devices;
  std::string model, serial;
  uint64_t min_size = 0, max_size = 0;  // 0 = unbounded
  std::optional<bool> rotational;
  struct Force {
    std::string path;       // /dev/disk/by-id/...
    std::string signature;  // what it may carry: ext4, gpt, LVM2_member, swap, ...
  };
  std::vector<Force> force;

  // No selection configured: the volume group must already exist.
  bool empty() const;
};

// Reads the keys above from a pool's options (other keys are ignored);
// INVALID_ARGUMENT names the option and the rule.
Status ParseDiskRules(const Params& options, DiskRules* out);

// What nodevold knows about one block device.
struct DiskInfo {
  std::string devnode;              // /dev/vdb
  dev_t devnum = 0;
  std::string model, serial;        // udev ID_MODEL / ID_SERIAL_SHORT, else sysfs
  uint64_t size = 0;                // bytes
  bool rotational = false;
  bool partition = false;
  bool read_only = false;
  std::vector<std::string> links;   // /dev/disk/by-id/... (with udevd only)
  std::string foreign;              // foreign.h: why it may be someone else's ("" = a local disk)
};

// Every block device of the kernel (via libudev enumerate + sysfs).
Status ListDisks(std::vector<DiskInfo>* out);

// "" when the device carries no signature; otherwise what it carries, e.g.
// "ext4 filesystem", "dos partition table", "LVM2_member (VG other)".
using SignatureProbe = std::function<Status(const std::string& devnode, std::string* what)>;
Status ProbeSignature(const std::string& devnode, std::string* what);  // libblkid

struct DiskDecision {
  DiskInfo disk;
  bool take = false;
  std::string reason;  // why taken or why not, for the log
};

// Decides for each disk. Disks already PVs of `vg` (per `report`) are not
// taken again (reason says so); disks not matched by the rules are left out
// silently unless named by `devices` (then the reason says why not).
std::vector<DiskDecision> SelectDisks(const DiskRules& rules, const std::string& vg, const LvmReport& report,
                                      const std::vector<DiskInfo>& disks, const SignatureProbe& probe);

// Creates `vg` from the taken disks, or extends it with them (only a VG
// tagged kManagedTag, only with pinned disks). Right before vgcreate or
// vgextend each disk is looked up again and passed by a /dev/disk/by-id
// link when it has one, checked to be the same device (number, serial,
// size) and still blank (or still carrying only its forced signature).
// With empty rules it only checks that `vg` exists (FAILED_PRECONDITION
// saying how to create it otherwise). `known_uuid`: the UUID this VG had
// when last seen ("" = never seen); a VG seen before and missing now (a
// disk not up yet) is not created again under its name (FAILED_PRECONDITION).
// Logs every decision. Idempotent.
Status EnsureVolumeGroup(Lvm* lvm, const std::string& vg, const DiskRules& rules, const SignatureProbe& probe,
                         const std::string& known_uuid = "");

// Watches the kernel for block devices being added (libudev monitor: udevd's
// events when udevd runs, the kernel's otherwise) and calls `on_add` for
// each, on the monitor's own thread. Stop() (or the destructor) joins it.
class DiskMonitor {
 public:
  using OnAdd = std::function<void(const DiskInfo&)>;
  static Status Start(OnAdd on_add, std::unique_ptr<DiskMonitor>* out);
  ~DiskMonitor();
  void Stop();

 private:
  DiskMonitor() = default;
  void Loop();
  OnAdd on_add_;
  int stop_fd_ = -1;  // eventfd
  void* udev_ = nullptr;
  void* monitor_ = nullptr;
  std::thread thread_;
};

}  // namespace nodevol
