#include "backend/lvm/capacity.h"

#include <algorithm>

namespace nodevol {
namespace {

uint64_t Minus(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

uint64_t Times(uint64_t bytes, double ratio) {
  double v = static_cast<double>(bytes) * ratio;
  return v >= 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(v);
}

}  // namespace

uint64_t RoundToExtents(uint64_t bytes, uint64_t extent_size) {
  if (extent_size == 0) return bytes;
  return (bytes + extent_size - 1) / extent_size * extent_size;
}

Status ComputeLvmCapacity(const LvmPoolOptions& pool, const LvmReport& report, Capacity* out) {
  const LvmVg* vg = report.FindVg(pool.vg);
  if (!vg)
    return Status::FailedPrecondition("lvm shows no volume group " + pool.vg +
                                      ": a disk under it may have failed or been removed (see pvs and the kernel log)");
  // lvm changes nothing in a VG with a PV missing (every lvcreate there
  // fails), and its figures count the missing disk's space.
  if (vg->missing_pvs > 0)
    return Status::FailedPrecondition("volume group " + pool.vg + " is missing " + std::to_string(vg->missing_pvs) +
                                      " of its disks, so lvm makes no volume in it: put the disk back, or remove it "
                                      "from the VG (vgreduce --removemissing) if it is lost (see pvs and the kernel log)");
  if (!pool.thin) {
    out->total_bytes = Minus(vg->size, pool.spare);
    out->free_bytes = Minus(vg->free, pool.spare);
    return Status::Ok();
  }
  const LvmLv* tp = report.FindLv(pool.vg, pool.thinpool);
  if (!tp || !tp->thin_pool())
    return Status::FailedPrecondition("thin pool " + pool.vg + "/" + pool.thinpool + " does not exist");
  // An inactive pool reports no usage (it reads as 0 % used): with
  // overprovisioning that would promise space already written. Unknown
  // usage is no room.
  if (!tp->active())
    return Status::FailedPrecondition("thin pool " + pool.vg + "/" + pool.thinpool +
                                      " is not active, so how full it is is unknown; activate it (lvchange -ay " +
                                      pool.vg + "/" + pool.thinpool + ")");
  if (!tp->fault.empty())
    return Status::FailedPrecondition("thin pool " + pool.vg + "/" + pool.thinpool + " " + tp->fault);
  uint64_t promised = 0;
  for (const LvmLv& lv : report.lvs)
    if (lv.vg == pool.vg && lv.pool_lv == pool.thinpool && lv.thin_volume()) promised += lv.size;
  uint64_t used = static_cast<uint64_t>(static_cast<double>(tp->size) * tp->data_percent / 100.0);
  out->total_bytes = Times(tp->size, pool.overprovision);
  out->free_bytes = std::min(Minus(out->total_bytes, promised),
                             Times(Minus(Minus(tp->size, used), pool.spare), pool.overprovision));
  if (tp->metadata_percent >= kMetadataFullPercent) out->free_bytes = 0;
  out->data_percent = tp->data_percent;
  out->metadata_percent = tp->metadata_percent;
  return Status::Ok();
}

}  // namespace nodevol
