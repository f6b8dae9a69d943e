// LvmBackend: growing raw block volumes onto zeroed blocks (lvm_backend.h).
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>

#include "backend/lvm/capacity.h"
#include "backend/lvm/lv_name.h"
#include "backend/lvm/lvm_backend.h"
#include "base/unique_fd.h"
#include "base/bounded_call.h"

namespace nodevol {

Status LvmBackend::ZeroWhole(const std::string& device, const Step& step) {
  UniqueFd fd(::open(device.c_str(), O_WRONLY | O_EXCL | O_CLOEXEC));
  if (fd.get() < 0) return Status::FromErrno("open " + device + " to zero it", errno);
  uint64_t size = 0;
  if (::ioctl(fd.get(), BLKGETSIZE64, &size) != 0) return Status::FromErrno("size of " + device, errno);
  constexpr uint64_t kChunk = 64ull << 20;
  for (uint64_t at = 0; at < size; at += kChunk) {
    uint64_t range[2] = {at, std::min(kChunk, size - at)};
    if (::ioctl(fd.get(), BLKZEROOUT, range) != 0) return Status::FromErrno("zero " + device, errno);
    if (step) step();
  }
  if (::fdatasync(fd.get()) != 0) return Status::FromErrno("sync " + device, errno);
  return Status::Ok();
}

Status LvmBackend::CheckThinPoolZeroes() {
  // Unprovisioned blocks of a thin LV read as zeroes, but a block the
  // pool provisions on a partial write keeps the rest of its old bytes
  // unless the pool zeroes it (lv_attr's 8th character, 'z'). Fresh: an
  // operator's lvchange --zero n since the cached report counts.
  LvmReport report;
  NODEVOL_RETURN_IF_ERROR(lvm_->Report(&report, /*fresh=*/true));
  const LvmLv* tp = report.FindLv(options_.vg, options_.thinpool);
  if (tp && !(tp->attr.size() > 7 && tp->attr[7] == 'z'))
    return Status::FailedPrecondition("thin pool " + options_.vg + "/" + options_.thinpool +
                                      " does not zero new blocks, so a raw block volume could show another "
                                      "volume's old data: lvchange --zero y " + options_.vg + "/" +
                                      options_.thinpool + ", or use a thick pool");
  return Status::Ok();
}

Status LvmBackend::RemoveScratch(const std::string& volume, const LvmReport& report, bool* removed) {
  if (removed) *removed = false;
  const std::string name = GrowLvNameFor(volume);
  const LvmLv* lv = report.FindLv(options_.vg, name);
  if (!lv) return Status::Ok();
  if (!lv->HasTag(kManagedTag) || !lv->HasTag(kGrowTagPrefix + volume) || !lv->HasTag(kPoolTagPrefix + pool_))
    return Status::FailedPrecondition("logical volume " + options_.vg + "/" + name + " is in the way of growing volume " +
                                      volume + " and was not made by nodevold for it; rename or remove it");
  NODEVOL_RETURN_IF_ERROR(lvm_->Remove(options_.vg, name, lv->uuid));
  if (removed) *removed = true;
  return Status::Ok();
}

Status LvmBackend::GrowZeroed(const std::string& volume, uint64_t new_size, uint64_t* lv_bytes) {
  const std::string scratch = GrowLvNameFor(volume);
  LvmLv lv, made;
  uint64_t bytes = 0;
  {
    std::lock_guard<std::mutex> l(*allocate_mu_);
    // Fresh: a scratch LV left by an interrupted grow is decided on what
    // is there now, and so is the room.
    LvmReport report;
    NODEVOL_RETURN_IF_ERROR(lvm_->Report(&report, /*fresh=*/true));
    bool removed = false;
    NODEVOL_RETURN_IF_ERROR(RemoveScratch(volume, report, &removed));
    if (removed) NODEVOL_RETURN_IF_ERROR(lvm_->Report(&report));
    const LvmLv* found = nullptr;
    NODEVOL_RETURN_IF_ERROR(FindLv(volume, report, &found));
    if (!found) return Status::NotFound("logical volume of volume " + volume + " is missing");
    lv = *found;
    const LvmVg* vg = report.FindVg(options_.vg);
    bytes = RoundToExtents(new_size, vg ? vg->extent_size : 0);
    *lv_bytes = lv.size;
    if (lv.size >= bytes) return Status::Ok();
    NODEVOL_RETURN_IF_ERROR(CheckFits(report, bytes - lv.size));
    // The pool's lvcreate options (stripes) give the scratch LV the layout
    // lvextend then needs for these extents.
    NODEVOL_RETURN_IF_ERROR(MapLvmNoSpace(lvm_->CreateScratch(
        options_.vg, scratch, bytes - lv.size, {kGrowTagPrefix + volume, kPoolTagPrefix + pool_},
        options_.lvcreate_options)));
    NODEVOL_RETURN_IF_ERROR(lvm_->Report(&report, /*fresh=*/true));
    const LvmLv* s = report.FindLv(options_.vg, scratch);
    if (!s) return Status::Internal("lvcreate made no LV " + options_.vg + "/" + scratch);
    made = *s;
  }
  // Outside the lock: the scratch LV holds the extents meanwhile, and a
  // big grow may zero for minutes. Bounded by its progress, a step per
  // 64 MiB; a disk that stops answering gates the pool (disk_gate.h).
  std::vector<std::string> ranges;
  std::string device;
  Status st = DeviceOf(made, &device);
  if (st.ok())
    st = gate_->Run("zeroing the extents volume " + volume + " grows onto",
                    [device](const Step& step) { return ZeroWhole(device, step); });
  if (st.ok()) st = lvm_->PeRanges(options_.vg, scratch, &ranges);
  std::lock_guard<std::mutex> l(*allocate_mu_);
  // Whatever happened, the scratch LV goes (unless a zeroing stuck in
  // the kernel still holds it open: then lvremove fails, and the retry
  // or the next start removes it): its extents are free again, and only
  // a grow onto zeroed ones may follow.
  Status gone = lvm_->Remove(options_.vg, scratch, made.uuid);
  NODEVOL_RETURN_IF_ERROR(st.WithContext("zeroing the extents volume " + volume + " grows onto"));
  NODEVOL_RETURN_IF_ERROR(gone);
  // Exactly those extents: an lvcreate by someone else in between makes
  // this fail (and the retry zeroes again), never grow onto old bytes.
  NODEVOL_RETURN_IF_ERROR(MapLvmNoSpace(lvm_->Extend(options_.vg, lv.name, bytes, ranges)));
  *lv_bytes = bytes;
  std::string all;
  for (const auto& r : ranges) all += (all.empty() ? "" : " ") + r;
  spdlog::info("pool {}: volume {} grew to {} bytes onto {} zeroed bytes of extents ({})", pool_, volume, bytes,
               bytes - lv.size, all);
  return Status::Ok();
}

}  // namespace nodevol
