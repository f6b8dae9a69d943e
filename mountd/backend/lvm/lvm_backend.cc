#include "backend/lvm/lvm_backend.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <linux/fs.h>
#include <sys/ioctl.h>

#include <cerrno>
#include <cstdio>

#include "backend/lvm/capacity.h"
#include "backend/lvm/filesystem.h"
#include "backend/lvm/lv_name.h"
#include "backend/volume_root.h"
#include "base/bounded_call.h"
#include "base/size.h"
#include "base/unique_fd.h"
#include "mount/bind.h"
#include "base/atomic_file.h"

namespace nodevol {
namespace {

constexpr char kVolumeKind[] = "an lvm volume";
// mkfs.xfs (xfsprogs >= 5.19) refuses anything smaller.
constexpr uint64_t kXfsMinBytes = uint64_t{300} << 20;

// Whether `dir` is a mount point, by comparing devices with its parent;
// *dev gets the device of what is mounted there.
Status IsMountPoint(const std::string& dir, bool* mounted, dev_t* dev) {
  struct stat st, parent;
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) return Status::FromErrno("stat " + dir, errno);
    *mounted = false;
    return Status::Ok();
  }
  std::string up = dir.substr(0, dir.rfind('/'));
  if (::stat(up.c_str(), &parent) != 0) return Status::FromErrno("stat " + up, errno);
  *mounted = st.st_dev != parent.st_dev;
  *dev = st.st_dev;
  return Status::Ok();
}

// Overwrites the start of a thick LV so that the next LV carved from the
// same extents never shows this volume's filesystem. O_EXCL: refuses a
// device something still has mounted.
Status ZeroStart(const std::string& device) {
  UniqueFd fd(::open(device.c_str(), O_WRONLY | O_EXCL | O_CLOEXEC));
  if (fd.get() < 0 && errno == EBUSY)
    return Status::Unavailable("open " + device + " to wipe it: it is busy (still mounted, or an earlier "
                               "unmount or wipe of it still waits on the disk)");
  if (fd.get() < 0) return Status::FromErrno("open " + device + " to wipe it", errno);
  static const std::string zeros(1 << 20, '\0');
  size_t done = 0;
  while (done < zeros.size()) {
    ssize_t n = ::pwrite(fd.get(), zeros.data() + done, zeros.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == ENOSPC) break;  // an LV smaller than 1 MiB
    if (n <= 0) return Status::FromErrno("wipe " + device, errno);
    done += static_cast<size_t>(n);
  }
  if (::fdatasync(fd.get()) != 0) return Status::FromErrno("sync " + device, errno);
  return Status::Ok();
}

}  // namespace

Status LvmBackend::Make(const std::string& pool, const Params& options, const std::string& state_dir,
                        std::shared_ptr<Lvm> lvm, std::unique_ptr<Backend>* out,
                        std::chrono::milliseconds mkfs_timeout, std::chrono::milliseconds io_limit) {
  LvmPoolOptions o;
  NODEVOL_RETURN_IF_ERROR(ParseLvmPoolOptions(pool, options, &o));
  NODEVOL_RETURN_IF_ERROR(CheckFsTools(o.fs).WithContext("pool " + pool + " (fs=" + o.fs + ")"));
  std::string root = state_dir + "/staging";
  NODEVOL_RETURN_IF_ERROR(MakePrivateDir(root));
  root += "/" + pool;
  NODEVOL_RETURN_IF_ERROR(MakePrivateDir(root));
  std::unique_ptr<LvmBackend> b(new LvmBackend(pool, std::move(o), root, std::move(lvm)));
  b->vg_uuid_dir_ = state_dir + "/lvm";
  b->mkfs_timeout_ = mkfs_timeout;
  b->gate_ = std::make_unique<DiskGate>(pool, "volume group " + b->options_.vg, io_limit);
  b->allocate_mu_ = &b->lvm_->AllocationLock(b->options_.vg);
  if (Status st = b->SetUpVolumeGroup(); !st.ok())
    spdlog::error("pool {}: {}; the pool takes no volumes until this is fixed", pool, st.message());
  if (!b->options_.disks.empty()) {
    LvmBackend* self = b.get();
    NODEVOL_RETURN_IF_ERROR(DiskMonitor::Start([self](const DiskInfo& d) { self->OnDiskAdded(d); }, &b->monitor_)
                                .WithContext("pool " + pool + ": watching for new disks"));
  }
  *out = std::move(b);
  return Status::Ok();
}

LvmBackend::LvmBackend(std::string pool, LvmPoolOptions options, std::string staging_root, std::shared_ptr<Lvm> lvm)
    : pool_(std::move(pool)), options_(std::move(options)), staging_root_(std::move(staging_root)), lvm_(std::move(lvm)) {}

LvmBackend::~LvmBackend() {
  if (monitor_) monitor_->Stop();
}

std::vector<std::string> LvmBackend::fs_types() const {
  std::vector<std::string> out = {""};
  for (const std::string& fs : LvmFsTypes())
    if (CheckFsTools(fs).ok()) out.push_back(fs);
  return out;
}

Params LvmBackend::attributes() const {
  Params p = {{"vg", options_.vg}, {"type", options_.thin ? "thin" : "thick"}, {"fs", options_.fs}};
  if (options_.thin) {
    p["thinpool"] = options_.thinpool;
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%g", options_.overprovision);
    p["overprovision"] = ratio;
  }
  if (options_.spare) p["spare"] = std::to_string(options_.spare);
  return p;
}

std::string LvmBackend::FsOf(const VolumeRecord& record) const {
  auto it = record.attributes.find("fs");
  if (it != record.attributes.end()) return it->second;
  return record.spec.fs_type.empty() ? options_.fs : record.spec.fs_type;
}

Status LvmBackend::Validate(const VolumeSpec& spec) const {
  if (!spec.fs_type.empty()) {
    bool known = false;
    for (const std::string& fs : LvmFsTypes()) known |= fs == spec.fs_type;
    if (!known) return Status::InvalidArgument("fs_type \"" + spec.fs_type + "\" is not one lvm pools make; use ext4 or xfs");
    NODEVOL_RETURN_IF_ERROR(CheckFsTools(spec.fs_type).WithContext("fs_type " + spec.fs_type + " on this node"));
  }
  if ((spec.fs_type.empty() ? options_.fs : spec.fs_type) == "xfs" && spec.size_bytes < kXfsMinBytes)
    return Status::InvalidArgument("xfs volumes must be at least 300 MiB (314572800 bytes), not " +
                                   std::to_string(spec.size_bytes) + " bytes; ask for more or use ext4");
  VolumeRoot root;
  return ParseVolumeRoot(kVolumeKind, spec.parameters, &root);
}

Status LvmBackend::FindLv(const std::string& volume, const LvmReport& report, const LvmLv** lv) {
  *lv = nullptr;
  const std::string name = LvNameFor(volume);
  const LvmLv* found = report.FindLv(options_.vg, name);
  if (!found) return Status::Ok();
  if (!found->HasTag(kManagedTag) || !found->HasTag(kVolumeTagPrefix + volume))
    return Status::FailedPrecondition("logical volume " + options_.vg + "/" + name +
                                      " exists but was not made by nodevold for volume " + volume +
                                      "; rename or remove it, nodevold will not touch it");
  // Pools may share a VG: another pool's LV of a volume of the same name
  // is that pool's.
  if (!found->HasTag(kPoolTagPrefix + pool_)) {
    std::string other = "no pool";
    for (const auto& t : found->tags)
      if (t.rfind(kPoolTagPrefix, 0) == 0) other = "pool " + t.substr(std::string(kPoolTagPrefix).size());
    return Status::FailedPrecondition("logical volume " + options_.vg + "/" + name + " of volume " + volume +
                                      " belongs to " + other + ", not pool " + pool_ + "; nodevold will not touch it");
  }
  *lv = found;
  return Status::Ok();
}

Status LvmBackend::AfterFailedLvcreate(const std::string& name, bool snapshot, int64_t created_unix,
                                       Params* attributes) {
  LvmReport now;
  const LvmLv* there = nullptr;
  if (!lvm_->Report(&now, /*fresh=*/true).ok()) return Status::Ok();  // undecided: the undo reads again
  Status found = snapshot ? FindSnapshotLv(name, now, &there) : FindLv(name, now, &there);
  if (!found.ok()) {
    (*attributes)[kFoundNotMade] = "";
    return found;
  }
  if (!there) {
    (*attributes)[kFoundNotMade] = "";  // nothing made: nothing to undo
    return Status::Ok();
  }
  if (there->created_unix < created_unix) {
    (*attributes)[kFoundNotMade] = there->uuid;
    return NotMadeHere(name, *there);
  }
  spdlog::warn("pool {}: lvcreate for {} failed after making LV {}/{}; the undo removes it", pool_, name,
               options_.vg, there->name);
  return Status::Ok();
}

bool LvmBackend::BegunByRecord(const VolumeRecord& record, const LvmLv& lv) const {
  // The record is written (state creating) before lvcreate runs: an LV
  // made earlier is not this record's work, whatever its tags say (a lost
  // record's volume, kept data).
  return lv.created_unix >= record.created_unix;
}

Status LvmBackend::DeviceOf(const LvmLv& lv, std::string* device) {
  int major = lv.kernel_major, minor = lv.kernel_minor;
  if (!lv.active()) {
    NODEVOL_RETURN_IF_ERROR(lvm_->Activate(lv.vg, lv.name));
    LvmReport report;
    NODEVOL_RETURN_IF_ERROR(lvm_->Report(&report));
    const LvmLv* now = report.FindLv(lv.vg, lv.name);
    if (!now || !now->active()) return Status::Internal("logical volume " + lv.vg + "/" + lv.name + " did not activate");
    major = now->kernel_major;
    minor = now->kernel_minor;
  }
  *device = lv.path.empty() ? "/dev/" + lv.vg + "/" + lv.name : lv.path;
  struct stat st;
  if (::stat(device->c_str(), &st) != 0) return Status::FromErrno("device of " + lv.vg + "/" + lv.name, errno);
  if (!S_ISBLK(st.st_mode)) return Status::FailedPrecondition(*device + " is not a block device");
  if (major >= 0 && (static_cast<int>(::major(st.st_rdev)) != major || static_cast<int>(::minor(st.st_rdev)) != minor))
    return Status::FailedPrecondition(*device + " is not the device of " + lv.vg + "/" + lv.name +
                                      " (" + std::to_string(major) + ":" + std::to_string(minor) + ")");
  return Status::Ok();
}

Status LvmBackend::EnsureMounted(const VolumeRecord& record, const LvmLv& lv, bool* mounted_now) {
  *mounted_now = false;
  std::string device;
  NODEVOL_RETURN_IF_ERROR(DeviceOf(lv, &device));
  struct stat dev;
  if (::stat(device.c_str(), &dev) != 0) return Status::FromErrno("stat " + device, errno);
  std::string dir = StagingDir(record.spec.name);
  NODEVOL_RETURN_IF_ERROR(MakePrivateDir(dir));
  bool mounted = false;
  dev_t shown = 0;
  NODEVOL_RETURN_IF_ERROR(IsMountPoint(dir, &mounted, &shown));
  if (mounted) {
    if (shown == dev.st_rdev) return Status::Ok();
    return Status::FailedPrecondition("staging directory " + dir + " has another filesystem mounted; unmount it");
  }
  std::string fs = FsOf(record);
  // A mount reads the filesystem's start and waits for as long as its
  // disk does: through the pool's gate, so a hung disk costs one thread.
  // (xfs refuses a second filesystem with the UUID of a mounted one, and a
  // volume made from a snapshot, or a clone, has its source's.)
  auto errno_of = std::make_shared<int>(0);
  auto try_mount = [&] {
    // Bounded as mkfs is: a journal replayed after a power loss is no
    // hung disk, and says nothing while it runs.
    return gate_->Run(
        "the staging mount of volume " + record.spec.name,
        [device, dir, fs, errno_of](const Step&) {
          const char* data = fs == "xfs" ? "nouuid" : nullptr;
          *errno_of = ::mount(device.c_str(), dir.c_str(), fs.c_str(), MS_NOSUID | MS_NODEV, data) == 0 ? 0 : errno;
          return Status::Ok();
        },
        mkfs_timeout_);
  };
  NODEVOL_RETURN_IF_ERROR(try_mount());
  int err = *errno_of;
  if (err == EIO) {
    // The LV's device-mapper table may still map a disk that was pulled
    // and put back (under a new device number): reload it from the
    // metadata and try once more. Only on this failure, so a pod start
    // pays no lvm process.
    spdlog::warn("pool {}: mount of LV {}/{} failed with an I/O error; reloading its table (lvchange --refresh) "
                 "in case its disk was pulled and put back",
                 pool_, lv.vg, lv.name);
    if (Status st = lvm_->Refresh(lv.vg, lv.name); !st.ok()) {
      spdlog::warn("pool {}: lvchange --refresh {}/{}: {}", pool_, lv.vg, lv.name, st.message());
    } else {
      NODEVOL_RETURN_IF_ERROR(try_mount());
      err = *errno_of;
    }
  }
  if (err != 0)
    return Status::FromErrno("mount " + device + " (" + fs + ") on " + dir +
                                 (err == EIO ? " (the disk under the volume fails reads: see the kernel log)" : ""),
                             err);
  *mounted_now = true;
  return Status::Ok();
}

Status LvmBackend::CheckFits(const LvmReport& report, uint64_t more_bytes) {
  Capacity cap;
  NODEVOL_RETURN_IF_ERROR(ComputeLvmCapacity(options_, report, &cap));
  if (more_bytes <= cap.free_bytes) return Status::Ok();
  std::string where = options_.thin ? "thin pool " + options_.vg + "/" + options_.thinpool : "volume group " + options_.vg;
  return Status::ResourceExhausted("pool " + pool_ + " (" + where + ") has " + ExactBytes(cap.free_bytes) + " free of " +
                                   ExactBytes(cap.total_bytes) + "; " + ExactBytes(more_bytes) + " asked (sizes round up to whole " +
                                   "extents)");
}

Status LvmBackend::NotMadeHere(const std::string& volume, const LvmLv& lv) const {
  return Status::FailedPrecondition(
      "logical volume " + options_.vg + "/" + lv.name + " of volume " + volume +
      " already exists, and no record says this volume's create made it: it may hold data, so nodevold will "
      "neither format nor remove it. Restart nodevold to adopt it as a ready volume, or remove it (lvremove " +
      options_.vg + "/" + lv.name + ") if it is not needed");
}

Status LvmBackend::Create(VolumeRecord* record, bool resumed) {
  return CreateAttempt(record, resumed, /*may_recreate=*/true);
}

Status LvmBackend::CreateAttempt(VolumeRecord* record, bool resumed, bool may_recreate) {
  const std::string& name = record->spec.name;
  VolumeRoot root;
  NODEVOL_RETURN_IF_ERROR(ParseVolumeRoot(kVolumeKind, record->spec.parameters, &root));
  const std::string fs = record->spec.fs_type.empty() ? options_.fs : record->spec.fs_type;
  const std::string lv_name = LvNameFor(name);
  LvmReport report;
  LvmLv made;
  const LvmLv* lv = nullptr;
  {
    std::lock_guard<std::mutex> l(*allocate_mu_);
    NODEVOL_RETURN_IF_ERROR(lvm_->Report(&report));
    if (!FindLv(name, report, &lv).ok() || lv) {
      // Something is there: decide on a fresh report, not a cached one
      // that may predate someone else's lvcreate or lvchange.
      NODEVOL_RETURN_IF_ERROR(lvm_->Report(&report, /*fresh=*/true));
      NODEVOL_RETURN_IF_ERROR(FindLv(name, report, &lv));
    }
    if (lv && (!resumed || record->state != VolumeState::kCreating || !BegunByRecord(*record, *lv))) {
      record->attributes[kFoundNotMade] = lv->uuid;
      return NotMadeHere(name, *lv);
    }
    if (!lv) {
      const LvmVg* vg = report.FindVg(options_.vg);
      if (!vg) return Status::FailedPrecondition("volume group " + options_.vg + " of pool " + pool_ + " does not exist");
      uint64_t bytes = RoundToExtents(record->spec.size_bytes, vg->extent_size);
      NODEVOL_RETURN_IF_ERROR(CheckFits(report, bytes));
      std::vector<std::string> extra = options_.lvcreate_options;
      extra.insert(extra.end(), {"--addtag", kPoolTagPrefix + pool_});
      Status st = options_.thin ? lvm_->CreateThin(options_.vg, options_.thinpool, lv_name, name, bytes, extra)
                                : lvm_->CreateThick(options_.vg, lv_name, name, bytes, extra);
      if (!st.ok()) {
        Status other = AfterFailedLvcreate(name, false, record->created_unix, &record->attributes);
        return other.ok() ? MapLvmNoSpace(st) : other;
      }
      // What lvcreate just made is known; a second report for it would be
      // the dearest step of a create (an lvm process). DeviceOf still checks
      // that the device node is a block device.
      made.name = lv_name;
      made.vg = options_.vg;
      made.path = "/dev/" + options_.vg + "/" + lv_name;
      made.size = bytes;
      made.created_unix = record->created_unix;
      made.attr = options_.thin ? "Vwi-a-tz--" : "-wi-a-----";
      made.tags = {kManagedTag, kVolumeTagPrefix + name, kPoolTagPrefix + pool_};
      lv = &made;
    }
  }
  std::string device, dir = StagingDir(name);
  if (record->spec.block && options_.thin) NODEVOL_RETURN_IF_ERROR(CheckThinPoolZeroes());
  if (Status st = DeviceOf(*lv, &device); !st.ok()) {
    if (lv == &made || !may_recreate) return st;
    // An LV left by a create killed midway may never activate: lvcreate
    // killed after writing the VG metadata but before the thin pool made
    // the thin device ("reload ioctl ... failed: No data available"). The
    // record is not ready, so nothing can be on it: make it again.
    spdlog::warn("pool {}: LV {}/{} left by an interrupted create of volume {} does not activate ({}); "
                 "removing it and creating it again",
                 pool_, options_.vg, lv->name, name, st.message());
    NODEVOL_RETURN_IF_ERROR(lvm_->Remove(options_.vg, lv->name, lv->uuid));
    return CreateAttempt(record, resumed, /*may_recreate=*/false);
  }
  if (record->spec.block) {
    // Not ready yet, so nobody has the device: (re)zeroing loses nothing.
    if (!options_.thin)
      NODEVOL_RETURN_IF_ERROR(CallWithin(mkfs_timeout_, "zeroing " + device, [device] { return ZeroWhole(device); }));
    record->attributes = {{"vg", options_.vg}, {"lv", lv->name}, {"device", device},
                          {"lv_bytes", std::to_string(lv->size)}};
    spdlog::info("pool {}: volume {} is {} LV {}/{} ({} bytes, raw block)", pool_, name,
                 options_.thin ? "thin" : "thick", options_.vg, lv->name, lv->size);
    return Status::Ok();
  }
  // Not mounted means no filesystem anyone could have used yet: the
  // record is not ready, so (re)making it loses nothing.
  bool mounted = false;
  dev_t shown = 0;
  NODEVOL_RETURN_IF_ERROR(IsMountPoint(dir, &mounted, &shown));
  if (!mounted) NODEVOL_RETURN_IF_ERROR(MakeFs(fs, device, mkfs_timeout_));
  record->attributes = {{"vg", options_.vg}, {"lv", lv->name},  {"device", device},
                        {"fs", fs},          {"path", dir},      {"lv_bytes", std::to_string(lv->size)}};
  bool mounted_now = false;
  NODEVOL_RETURN_IF_ERROR(EnsureMounted(*record, *lv, &mounted_now));
  NODEVOL_RETURN_IF_ERROR(ApplyVolumeRoot(dir, root));
  spdlog::info("pool {}: volume {} is {} LV {}/{} ({} bytes, {})", pool_, name, options_.thin ? "thin" : "thick",
               options_.vg, lv->name, lv->size, fs);
  return Status::Ok();
}

Status LvmBackend::Delete(const VolumeRecord& record) {
  const std::string& name = record.spec.name;
  std::string dir = StagingDir(name);
  // Fresh: a snapshot or cache attached (or removed) by the operator since
  // the last report decides whether anything may be zeroed and removed.
  LvmReport report;
  NODEVOL_RETURN_IF_ERROR(lvm_->Report(&report, /*fresh=*/true));
  const LvmLv* lv = nullptr;
  if (Status st = FindLv(name, report, &lv); !st.ok()) {
    // Someone else's LV under our name: the volume has no LV to delete.
    spdlog::warn("pool {}: deleting volume {}: {}", pool_, name, st.message());
    lv = nullptr;
  }
  auto found_not_made = record.attributes.find(kFoundNotMade);
  const bool not_made_here = found_not_made != record.attributes.end() &&
                             (found_not_made->second.empty() || (lv && found_not_made->second == lv->uuid));
  if (lv && record.state == VolumeState::kCreating && (!BegunByRecord(record, *lv) || not_made_here)) {
    // Undoing a create that found this LV already there: neither the LV
    // nor a staging mount of it is this call's to undo.
    spdlog::warn("pool {}: volume {} never became ready; LV {}/{} predates its record and is left alone", pool_,
                 name, options_.vg, lv->name);
    return Status::Ok();
  }
  NODEVOL_RETURN_IF_ERROR(UnmountStaging(dir).WithContext("unmount staging " + dir));
  if (record.spec.block && !options_.thin) NODEVOL_RETURN_IF_ERROR(RemoveScratch(name, report));
  // The report is the cached one when the VG metadata is unchanged since,
  // which misses a change someone made while a command of ours ran
  // (lvm.h). Whatever is stacked on an active thick LV shows in its
  // device-mapper table: anything but a plain mapping is decided on a new
  // report before a byte is zeroed.
  if (lv && !lv->thin_volume() && lv->active() && !lvm_->PlainMapping(*lv)) {
    NODEVOL_RETURN_IF_ERROR(lvm_->NewReport(&report));
    if (!FindLv(name, report, &lv).ok()) lv = nullptr;
  }
  if (lv) {
    // Checked before the first MiB is zeroed: Remove checks it again.
    if (auto deps = report.DependentsOf(*lv); !deps.empty()) {
      std::string list;
      for (const auto& d : deps) list += (list.empty() ? "" : ", ") + d;
      return Status::FailedPrecondition("logical volume " + options_.vg + "/" + lv->name + " of volume " + name +
                                        " has " + list + ": remove them first (lvremove); nodevold removes nothing "
                                        "it did not make");
    }
    // The undo of a create that never became ready has nothing of a pod's
    // to wipe (and a new LV's own start is zeroed by lvcreate -Zy): a disk
    // failing writes, which may be why the create failed, must not keep the
    // undo from removing the LV.
    if (!lv->thin_volume() && lv->active() && record.state != VolumeState::kCreating) {
      std::string device;
      NODEVOL_RETURN_IF_ERROR(DeviceOf(*lv, &device));
      // Bounded: a disk that stops answering holds the write for ever.
      NODEVOL_RETURN_IF_ERROR(
          CallWithin(mkfs_timeout_, "wiping the start of " + device, [device] { return ZeroStart(device); }));
    }
    NODEVOL_RETURN_IF_ERROR(lvm_->Remove(options_.vg, lv->name, lv->uuid));
    spdlog::info("pool {}: removed LV {}/{} of volume {}", pool_, options_.vg, lv->name, name);
  }
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) return Status::FromErrno("rmdir " + dir, errno);
  return Status::Ok();
}

Status LvmBackend::Expand(VolumeRecord* record, uint64_t new_size) {
  const std::string& name = record->spec.name;
  // A thick LV's new extents hold whatever a deleted volume left there,
  // and a pod holding the device reads them the moment lvextend resumes
  // it: a raw block volume's are zeroed before it gets them (grow.cc).
  if (record->spec.block && !options_.thin) {
    uint64_t lv_bytes = 0;
    NODEVOL_RETURN_IF_ERROR(GrowZeroed(name, new_size, &lv_bytes));
    record->attributes["lv_bytes"] = std::to_string(lv_bytes);
    return Status::Ok();
  }
  LvmReport report;
  const LvmLv* lv = nullptr;
  {
    std::lock_guard<std::mutex> l(*allocate_mu_);
    NODEVOL_RETURN_IF_ERROR(lvm_->Report(&report));
    NODEVOL_RETURN_IF_ERROR(FindLv(name, report, &lv));
    if (!lv) return Status::NotFound("logical volume of volume " + name + " is missing");
    const LvmVg* vg = report.FindVg(options_.vg);
    uint64_t bytes = RoundToExtents(new_size, vg ? vg->extent_size : 0);
    if (lv->size < bytes) {
      NODEVOL_RETURN_IF_ERROR(CheckFits(report, bytes - lv->size));
      if (record->spec.block) NODEVOL_RETURN_IF_ERROR(CheckThinPoolZeroes());
      NODEVOL_RETURN_IF_ERROR(MapLvmNoSpace(lvm_->Extend(options_.vg, lv->name, bytes)));
      NODEVOL_RETURN_IF_ERROR(lvm_->Report(&report));
      NODEVOL_RETURN_IF_ERROR(FindLv(name, report, &lv));
      if (!lv) return Status::Internal("logical volume of volume " + name + " vanished while extending it");
    }
  }
  if (record->spec.block) {
    record->attributes["lv_bytes"] = std::to_string(lv->size);
    return Status::Ok();
  }
  bool mounted_now = false;
  NODEVOL_RETURN_IF_ERROR(EnsureMounted(*record, *lv, &mounted_now));
  std::string device;
  NODEVOL_RETURN_IF_ERROR(DeviceOf(*lv, &device));
  Status grown = GrowFs(FsOf(*record), device, StagingDir(name), mkfs_timeout_);
  if (mounted_now) {
    Status st = UnmountStaging(StagingDir(name));
    if (grown.ok()) grown = st;
  }
  NODEVOL_RETURN_IF_ERROR(grown.WithContext("grow the filesystem of " + name));
  record->attributes["lv_bytes"] = std::to_string(lv->size);
  return Status::Ok();
}

Status LvmBackend::Stage(const VolumeRecord& record, std::string* path) {
  // Staged already (a create leaves the volume so, and so does another
  // publication of it): the recorded device mounted at the staging dir is
  // all a bind needs, and a pod start pays no lvm process. The create
  // leaves no cached report behind (it skips the one after lvcreate), so
  // reading one here cost a fullreport per LVM pod start: lvm_bench's
  // publish went from 41 to 964 ms under TCG.
  if (record.spec.block) {
    // The recorded device node, when the LV is active: no lvm process
    // per pod start (the trap StagedAlready avoids for filesystems).
    auto device = record.attributes.find("device");
    struct stat dev;
    if (device != record.attributes.end() && ::stat(device->second.c_str(), &dev) == 0 && S_ISBLK(dev.st_mode)) {
      *path = device->second;
      return Status::Ok();
    }
  } else if (StagedAlready(record)) {
    *path = StagingDir(record.spec.name);
    return Status::Ok();
  }
  LvmReport report;
  NODEVOL_RETURN_IF_ERROR(lvm_->Report(&report));
  const LvmLv* lv = nullptr;
  NODEVOL_RETURN_IF_ERROR(FindLv(record.spec.name, report, &lv));
  if (!lv) {
    // Missing from the kept report, which may predate a disk put back (its
    // stamp cannot see a PV it did not know): decide on a new one.
    NODEVOL_RETURN_IF_ERROR(lvm_->Report(&report, /*fresh=*/true));
    NODEVOL_RETURN_IF_ERROR(FindLv(record.spec.name, report, &lv));
  }
  if (!lv)
    return Status::NotFound("logical volume " + options_.vg + "/" + LvNameFor(record.spec.name) + " of volume " +
                            record.spec.name + " is missing");
  // A raw block volume is its device: nothing to mount.
  if (record.spec.block) return DeviceOf(*lv, path);
  bool mounted_now = false;
  NODEVOL_RETURN_IF_ERROR(EnsureMounted(record, *lv, &mounted_now));
  *path = StagingDir(record.spec.name);
  return Status::Ok();
}

bool LvmBackend::StagedAlready(const VolumeRecord& record) const {
  auto device = record.attributes.find("device");
  if (device == record.attributes.end() || device->second.empty()) return false;
  struct stat dev;
  if (::stat(device->second.c_str(), &dev) != 0 || !S_ISBLK(dev.st_mode)) return false;
  bool mounted = false;
  dev_t shown = 0;
  return IsMountPoint(StagingDir(record.spec.name), &mounted, &shown).ok() && mounted && shown == dev.st_rdev;
}

Status LvmBackend::Unstage(const VolumeRecord& record) {
  if (record.spec.block) return Status::Ok();
  return UnmountStaging(StagingDir(record.spec.name));
}

Status LvmBackend::UnmountStaging(const std::string& dir) const {
  return CallWithin(mkfs_timeout_, "unmounting " + dir, [dir] { return Unmount(dir); });
}

Status LvmBackend::Check(const VolumeRecord& record) {
  // Shared, not copied: a start checks every volume (1000 copies of a
  // report of 1000 LVs took 4.9 s under TCG: lvm_start_bench).
  std::shared_ptr<const LvmReport> report;
  NODEVOL_RETURN_IF_ERROR(lvm_->Kept(&report));
  const LvmLv* lv = nullptr;
  NODEVOL_RETURN_IF_ERROR(FindLv(record.spec.name, *report, &lv));
  if (!lv)
    return Status::NotFound("logical volume " + options_.vg + "/" + LvNameFor(record.spec.name) + " is missing");
  return Status::Ok();
}

Status LvmBackend::GetCapacity(Capacity* out) {
  // The cached report follows our own lvm commands, and serves while the
  // VG metadata on disk is unchanged (an operator's lvcreate shows there);
  // a thin pool's usage, which grows as pods write, is read from
  // device-mapper with it (lvm.h). So a poll starts no lvm process while
  // nothing changes; where the metadata cannot be read, a report at most
  // 30 s old serves.
  LvmReport report;
  NODEVOL_RETURN_IF_ERROR(lvm_->Report(&report, std::chrono::seconds(30)));
  if (Status st = ComputeLvmCapacity(options_, report, out); !st.ok()) {
    // A pool that makes its VG from matched disks has none until the first
    // one appears: no room yet, not a fault. Any other VG or thin pool lvm
    // does not show (a disk under it failed or was pulled) is a fault: the
    // pool is left out of the node's capacity, so it takes no new volume,
    // and a create there says why instead of "0 bytes free".
    if (!options_.disks.empty() && !report.FindVg(options_.vg) && KnownVgUuid().empty()) {
      *out = Capacity{};
      spdlog::debug("pool {}: {}", pool_, st.message());
      return Status::Ok();
    }
    return st;
  }
  return Status::Ok();
}

Status LvmBackend::Recover(std::vector<std::string>* drift) {
  LvmReport report;
  NODEVOL_RETURN_IF_ERROR(lvm_->Report(&report, true));
  for (const LvmLv& lv : report.lvs) {
    // A grow of a raw block volume killed midway leaves its scratch LV
    // (grow.cc): it holds no one's data, only the VG's room.
    if (lv.vg == options_.vg && lv.HasTag(kManagedTag) && lv.HasTag(kPoolTagPrefix + pool_))
      for (const std::string& t : lv.tags)
        if (t.rfind(kGrowTagPrefix, 0) == 0 && GrowLvNameFor(t.substr(std::string(kGrowTagPrefix).size())) == lv.name) {
          Status st = lvm_->Remove(options_.vg, lv.name, lv.uuid);
          drift->push_back("logical volume " + options_.vg + "/" + lv.name + " was left by an interrupted grow of "
                           "a raw block volume; " + (st.ok() ? "removed" : "removing it failed: " + st.message()));
        }
    if (lv.vg != options_.vg || !lv.needs_refresh()) continue;
    bool ours = lv.HasTag(kManagedTag) && lv.HasTag(kPoolTagPrefix + pool_);
    bool pool_lv = options_.thin && lv.name == options_.thinpool;
    if (!ours && !pool_lv) continue;
    Status st = lvm_->Refresh(options_.vg, lv.name);
    drift->push_back("logical volume " + options_.vg + "/" + lv.name + " was left suspended by an interrupted lvm "
                     "command; " + (st.ok() ? "resumed (lvchange --refresh)" : "resuming it failed: " + st.message()));
  }
  return Status::Ok();
}

Status LvmBackend::Survey(const std::set<std::string>& known, std::vector<VolumeRecord>* unrecorded,
                          std::vector<std::string>* drift) {
  LvmReport report;
  // Recover read a fresh report moments ago at the same start: with no
  // lvm command of ours since (any drops the cache), it serves, and a
  // start runs one fullreport per pool fewer.
  NODEVOL_RETURN_IF_ERROR(lvm_->Report(&report, std::chrono::milliseconds(kStartReportAge)));
  std::set<std::string> ours;
  for (const LvmLv& lv : report.lvs) {
    if (lv.vg != options_.vg || !lv.HasTag(kManagedTag) || !lv.HasTag(kPoolTagPrefix + pool_)) continue;
    std::string volume;
    for (const std::string& t : lv.tags)
      if (t.rfind(kVolumeTagPrefix, 0) == 0) volume = t.substr(std::string(kVolumeTagPrefix).size());
    if (volume.empty() || LvNameFor(volume) != lv.name) continue;
    ours.insert(volume);
    if (known.count(volume)) continue;
    VolumeRecord rec;
    rec.spec = {volume, pool_, lv.size, "", {}};
    rec.backend = kind();
    rec.state = VolumeState::kReady;
    std::string device = lv.path, fs;
    bool probed = lv.active() && ProbeFsType(device, &fs).ok();
    if (probed && !fs.empty()) rec.spec.fs_type = fs;
    rec.attributes = {{"vg", options_.vg}, {"lv", lv.name}, {"device", device}, {"fs", fs.empty() ? options_.fs : fs},
                      {"path", StagingDir(volume)}, {"lv_bytes", std::to_string(lv.size)}};
    // No filesystem on it: a raw block volume's LV, adopted as one, so that
    // nothing ever formats it.
    if (probed && fs.empty()) {
      rec.spec.block = true;
      rec.attributes = {{"vg", options_.vg}, {"lv", lv.name}, {"device", device}, {"lv_bytes", std::to_string(lv.size)}};
    }
    unrecorded->push_back(rec);
  }
  if (DIR* d = ::opendir(staging_root_.c_str())) {
    while (struct dirent* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == ".." || known.count(n) || ours.count(n)) continue;
      bool mounted = false;
      dev_t dev = 0;
      if (IsMountPoint(StagingDir(n), &mounted, &dev).ok() && mounted)
        drift->push_back("staging mount " + StagingDir(n) + " belongs to no volume record; left mounted");
    }
    ::closedir(d);
  }
  return Status::Ok();
}

Status LvmBackend::SetUpVolumeGroup() {
  std::lock_guard<std::mutex> l(setup_mu_);
  if (!options_.disks.empty())
    NODEVOL_RETURN_IF_ERROR(EnsureVolumeGroup(lvm_.get(), options_.vg, options_.disks, ProbeSignature, KnownVgUuid()));
  LvmReport report;
  NODEVOL_RETURN_IF_ERROR(lvm_->Report(&report, true));
  const LvmVg* vg = report.FindVg(options_.vg);
  if (!vg)
    return Status::FailedPrecondition("volume group " + options_.vg +
                                      " does not exist: create it (vgcreate) or give the pool disk rules (devices=, match-*=)");
  if (vg->HasTag(kManagedTag) && !vg->uuid.empty() && KnownVgUuid() != vg->uuid) RememberVgUuid(vg->uuid);
  if (!options_.thin) return Status::Ok();
  const LvmLv* tp = report.FindLv(options_.vg, options_.thinpool);
  uint64_t want = options_.thinpool_bytes;
  if (options_.thinpool_percent)
    want = vg->size / 100 * options_.thinpool_percent / std::max<uint64_t>(vg->extent_size, 1) * vg->extent_size;
  if (tp) {
    if (!tp->thin_pool()) return Status::FailedPrecondition(options_.vg + "/" + options_.thinpool + " is not a thin pool");
    // After a boot without autoactivation: its usage is unknown until it
    // is active (capacity.h), so activate ours; an operator's stays as is.
    if (!tp->active() && tp->HasTag(kManagedTag)) {
      spdlog::info("pool {}: activating thin pool {}/{}", pool_, options_.vg, options_.thinpool);
      NODEVOL_RETURN_IF_ERROR(lvm_->Activate(options_.vg, options_.thinpool));
    }
    // A pool sized as a share of the VG follows the VG as disks are added.
    if (options_.thinpool_percent && tp->HasTag(kManagedTag) && want > tp->size + vg->extent_size && vg->free > 0) {
      uint64_t grow_to = std::min(want, tp->size + vg->free / vg->extent_size * vg->extent_size);
      spdlog::info("pool {}: growing thin pool {}/{} to {} bytes ({}% of the VG)", pool_, options_.vg,
                   options_.thinpool, grow_to, options_.thinpool_percent);
      return lvm_->Extend(options_.vg, options_.thinpool, grow_to);
    }
    return Status::Ok();
  }
  if (want == 0)
    return Status::FailedPrecondition("thin pool " + options_.vg + "/" + options_.thinpool +
                                      " does not exist: create it (lvcreate --type thin-pool) or set thinpool-size");
  spdlog::info("pool {}: creating thin pool {}/{} of {} bytes", pool_, options_.vg, options_.thinpool, want);
  return MapLvmNoSpace(lvm_->CreateThinPool(options_.vg, options_.thinpool, want));
}

std::string LvmBackend::KnownVgUuid() const {
  std::string text;
  if (!ReadWholeFile(vg_uuid_dir_ + "/" + options_.vg + ".vg-uuid", &text).ok()) return "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

void LvmBackend::RememberVgUuid(const std::string& uuid) {
  Status st = EnsureDir(vg_uuid_dir_, 0700);
  if (st.ok()) st = WriteFileAtomic(vg_uuid_dir_, options_.vg + ".vg-uuid", uuid + "\n");
  if (!st.ok()) spdlog::warn("pool {}: cannot record the UUID of VG {}: {}", pool_, options_.vg, st.message());
}

void LvmBackend::OnDiskAdded(const DiskInfo& disk) {
  spdlog::info("pool {}: block device {} appeared (serial \"{}\", {} bytes)", pool_, disk.devnode, disk.serial, disk.size);
  // Re-evaluating every disk is idempotent and covers disks whose add
  // event came before their udev properties.
  if (Status st = SetUpVolumeGroup(); !st.ok()) spdlog::warn("pool {}: after {} appeared: {}", pool_, disk.devnode, st.message());
}

}  // namespace nodevol
