// LvmProbe: what nodevold reads about LVM in-process, without starting an
// lvm process (each costs a quarter of a volume's create under TCG:
// docs/benchmarks.md, lvm_bench).
//
// - MetadataStamp: a fingerprint of the volume group metadata on the PVs,
//   from each PV's label and metadata area header (where the current
//   metadata text is and its checksum). Every lvm command that changes a
//   VG writes new metadata, so an unchanged stamp means an unchanged VG:
//   a cached report is as good as a fresh one. The kernel's block device
//   names are part of it: a disk pulled or put back changes no metadata
//   on the PVs the report knew.
// - ActiveLv: the UUID and device number of an active LV, from its
//   device-mapper device (lvm names it "LVM-<vg uuid><lv uuid>").
// - TargetTypes: the device-mapper targets an active device is made of
//   ("linear", "striped"; "snapshot-origin" once a thick snapshot is taken
//   of it, "cache" with a cache attached).
// - ThinPoolUsage: how full a thin pool is, from device-mapper's status of
//   its thin-pool target (what `dmsetup status` and lvm's data_percent
//   read), the one figure that changes without any lvm command.
// Each fails (the caller then asks lvm) when the kernel or disk does not
// answer as expected; none changes anything.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace nodevol {

class LvmProbe {
 public:
  virtual ~LvmProbe() = default;
  virtual Status MetadataStamp(const std::vector<std::string>& pv_devices, std::string* stamp) = 0;
  // `device` is an LV's node (/dev/VG/LV); UUIDs in lvm's dashed form.
  virtual Status ActiveLv(const std::string& device, std::string* vg_uuid, std::string* lv_uuid, int* major,
                          int* minor) = 0;
  virtual Status TargetTypes(int major, int minor, std::vector<std::string>* types) = 0;
  // Percentages as lvm reports data_percent and metadata_percent.
  virtual Status ThinPoolUsage(const std::string& vg_uuid, const std::string& pool_uuid, double* data_percent,
                               double* metadata_percent) = 0;
};

// The real one: reads the PVs with O_DIRECT, sysfs and /dev/mapper/control.
std::shared_ptr<LvmProbe> MakeLvmProbe();

// `inner` with MetadataStamp bounded to `limit`: a PV that stops answering
// (a dying disk, a suspended device-mapper device) blocks a read in the
// kernel, uninterruptibly, and the caller would wait with it. The read
// runs on a thread of its own; past the limit the caller gets UNAVAILABLE
// (and asks lvm, whose commands have deadlines), and until that read
// returns every later stamp fails at once rather than start another.
std::shared_ptr<LvmProbe> MakeBoundedLvmProbe(std::shared_ptr<LvmProbe> inner, std::chrono::milliseconds limit);

// lvm's dashed UUID (6-4-4-4-4-4-6) of 32 characters, or "" when `raw`
// is not 32 characters.
std::string DashedLvmUuid(const std::string& raw);

// The stamp of one PV from its first 4 KiB (label) and a reader of the
// metadata area headers it names; pure, so that a hostile or torn label is
// unit-tested. INTERNAL when it is not an LVM2 label.
Status StampFromLabel(const std::string& first_4k, const std::function<Status(uint64_t offset, std::string* sector)>& read_mda,
                      std::string* stamp);

// Parses a thin-pool target's status line ("<transaction> <used>/<total>
// metadata blocks <used>/<total> data blocks <held root> <mode> ...").
// FAILED_PRECONDITION for a pool that takes no new volume: failed ("Fail",
// "Error": an I/O error under it) or read-only after a metadata error;
// INTERNAL for a line that is none of these.
Status ParseThinPoolStatus(const std::string& status, double* data_percent, double* metadata_percent);

}  // namespace nodevol
