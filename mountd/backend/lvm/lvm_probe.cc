#include "backend/lvm/lvm_probe.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/dm-ioctl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>

#include "base/unique_fd.h"
#include "base/atomic_file.h"

namespace nodevol {
namespace {

constexpr size_t kBlock = 4096;

// The kernel's block devices by name (/sys/class/block), one line. A disk
// put back, or a new one holding a PV of the VG, changes no metadata on the
// PVs a report knew: without this the stamp would keep a report that
// misses it (or still shows a pulled disk's VG) for kStampedReportAge.
Status BlockDevices(std::string* out) {
  DIR* dir = ::opendir("/sys/class/block");
  if (!dir) return Status::FromErrno("open /sys/class/block", errno);
  std::set<std::string> names;
  while (struct dirent* e = ::readdir(dir))
    if (e->d_name[0] != '.') names.insert(e->d_name);
  ::closedir(dir);
  *out = "block=";
  for (const auto& n : names) *out += n + ",";
  return Status::Ok();
}

// Reads `bytes` at `offset` (both multiples of kBlock) with O_DIRECT: lvm
// writes its metadata so, and a read through the page cache could see an
// older copy.
Status ReadDirect(int fd, uint64_t offset, size_t bytes, std::string* out) {
  void* buf = nullptr;
  if (posix_memalign(&buf, kBlock, bytes) != 0) return Status::Internal("out of memory");
  ssize_t n = ::pread(fd, buf, bytes, static_cast<off_t>(offset));
  int err = errno;
  if (n > 0) out->assign(static_cast<char*>(buf), static_cast<size_t>(n));
  std::free(buf);
  if (n < 0) return Status::FromErrno("read", err);
  if (static_cast<size_t>(n) != bytes) return Status::Internal("short read");
  return Status::Ok();
}

Status OpenDevice(const std::string& device, UniqueFd* fd) {
  fd->reset(::open(device.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC | O_NOFOLLOW));
  if (fd->get() < 0 && errno == EINVAL) fd->reset(::open(device.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (fd->get() < 0) return Status::FromErrno("open " + device, errno);
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return Status::FromErrno("stat " + device, errno);
  if (!S_ISBLK(st.st_mode)) return Status::FailedPrecondition(device + " is not a block device");
  return Status::Ok();
}

std::string Undashed(const std::string& uuid) {
  std::string out;
  for (char c : uuid)
    if (c != '-') out += c;
  return out;
}

class DevProbe : public LvmProbe {
 public:
  Status MetadataStamp(const std::vector<std::string>& pv_devices, std::string* stamp) override {
    stamp->clear();
    for (const std::string& device : pv_devices) {
      UniqueFd fd;
      NODEVOL_RETURN_IF_ERROR(OpenDevice(device, &fd));
      std::string label;
      NODEVOL_RETURN_IF_ERROR(ReadDirect(fd.get(), 0, kBlock, &label).WithContext(device));
      auto read_mda = [&](uint64_t offset, std::string* sector) {
        std::string block;
        NODEVOL_RETURN_IF_ERROR(ReadDirect(fd.get(), offset / kBlock * kBlock, kBlock, &block).WithContext(device));
        *sector = block.substr(offset % kBlock);
        return Status::Ok();
      };
      *stamp += device + "=";
      NODEVOL_RETURN_IF_ERROR(StampFromLabel(label, read_mda, stamp).WithContext(device));
      *stamp += "\n";
    }
    std::string devices;
    NODEVOL_RETURN_IF_ERROR(BlockDevices(&devices));
    *stamp += devices;
    return Status::Ok();
  }

  Status ActiveLv(const std::string& device, std::string* vg_uuid, std::string* lv_uuid, int* major,
                  int* minor) override {
    struct stat st;
    if (::stat(device.c_str(), &st) != 0) return Status::FromErrno("stat " + device, errno);
    if (!S_ISBLK(st.st_mode)) return Status::FailedPrecondition(device + " is not a block device");
    const std::string sys = "/sys/dev/block/" + std::to_string(::major(st.st_rdev)) + ":" +
                            std::to_string(::minor(st.st_rdev)) + "/dm/uuid";
    std::string dm_uuid;
    NODEVOL_RETURN_IF_ERROR(ReadWholeFile(sys, &dm_uuid));
    while (!dm_uuid.empty() && dm_uuid.back() == '\n') dm_uuid.pop_back();
    // LVM-<32 VG uuid><32 LV uuid>, no layer suffix for a public LV.
    if (dm_uuid.size() != 4 + 64 || dm_uuid.compare(0, 4, "LVM-") != 0)
      return Status::FailedPrecondition(device + " is not an LVM logical volume (device-mapper uuid \"" + dm_uuid + "\")");
    *vg_uuid = DashedLvmUuid(dm_uuid.substr(4, 32));
    *lv_uuid = DashedLvmUuid(dm_uuid.substr(36));
    *major = static_cast<int>(::major(st.st_rdev));
    *minor = static_cast<int>(::minor(st.st_rdev));
    return Status::Ok();
  }

  Status TargetTypes(int major, int minor, std::vector<std::string>* types) override {
    UniqueFd control;
    NODEVOL_RETURN_IF_ERROR(OpenControl(&control));
    std::vector<Target> targets;
    NODEVOL_RETURN_IF_ERROR(Targets(control.get(), "", ::makedev(major, minor), &targets));
    types->clear();
    for (const Target& t : targets) types->push_back(t.type);
    return Status::Ok();
  }

  Status ThinPoolUsage(const std::string& vg_uuid, const std::string& pool_uuid, double* data_percent,
                       double* metadata_percent) override {
    UniqueFd control;
    NODEVOL_RETURN_IF_ERROR(OpenControl(&control));
    const std::string base = "LVM-" + Undashed(vg_uuid) + Undashed(pool_uuid);
    // With thin volumes the pool target is the "-tpool" layer under the
    // pool's public device; a pool active on its own may carry it itself.
    Status last;
    for (const std::string& uuid : {base + "-tpool", base}) {
      std::vector<Target> targets;
      last = Targets(control.get(), uuid, 0, &targets);
      if (last.ok() && targets.size() == 1 && targets[0].type == "thin-pool")
        return ParseThinPoolStatus(targets[0].status, data_percent, metadata_percent);
      if (last.ok()) last = Status::NotFound("device-mapper device " + uuid + " is no thin-pool target");
    }
    return last;
  }

 private:
  struct Target {
    std::string type, status;
  };
  // The targets of a device-mapper device, by its uuid or (uuid empty) its
  // device number.
  static Status Targets(int control, const std::string& uuid, dev_t dev, std::vector<Target>* out) {
    alignas(8) char buf[16384];
    std::memset(buf, 0, sizeof buf);
    auto* io = reinterpret_cast<struct dm_ioctl*>(buf);
    io->version[0] = DM_VERSION_MAJOR;
    io->data_size = sizeof buf;
    io->data_start = sizeof(struct dm_ioctl);
    // No flush: a thin pool's status would otherwise commit its metadata
    // at every capacity poll.
    io->flags = DM_NOFLUSH_FLAG;
    const std::string what = uuid.empty() ? "device " + std::to_string(::major(dev)) + ":" +
                                                std::to_string(::minor(dev))
                                          : uuid;
    if (uuid.size() >= sizeof io->uuid) return Status::InvalidArgument("device-mapper uuid too long");
    std::memcpy(io->uuid, uuid.data(), uuid.size());
    io->dev = uuid.empty() ? static_cast<__u64>(dev) : 0;
    if (::ioctl(control, DM_TABLE_STATUS, io) != 0) return Status::FromErrno("device-mapper status of " + what, errno);
    if (io->flags & DM_BUFFER_FULL_FLAG) return Status::Internal("device-mapper status of " + what + " too long");
    out->clear();
    size_t at = io->data_start;
    for (uint32_t i = 0; i < io->target_count; ++i) {
      if (at + sizeof(struct dm_target_spec) >= sizeof buf) return Status::Internal("device-mapper status of " + what);
      auto* spec = reinterpret_cast<struct dm_target_spec*>(buf + at);
      const char* text = reinterpret_cast<const char*>(spec + 1);
      Target t;
      t.type.assign(spec->target_type, strnlen(spec->target_type, sizeof spec->target_type));
      t.status.assign(text, strnlen(text, sizeof buf - at - sizeof *spec));
      out->push_back(std::move(t));
      // `next` is relative to the start of the data area.
      if (spec->next == 0) break;
      at = io->data_start + spec->next;
    }
    return Status::Ok();
  }

  static Status OpenControl(UniqueFd* fd) {
    fd->reset(::open("/dev/mapper/control", O_RDWR | O_CLOEXEC));
    if (fd->get() < 0) return Status::FromErrno("open /dev/mapper/control", errno);
    return Status::Ok();
  }
};

}  // namespace

std::string DashedLvmUuid(const std::string& raw) {
  if (raw.size() != 32) return "";
  static const int kGroups[] = {6, 4, 4, 4, 4, 4, 6};
  std::string out;
  size_t at = 0;
  for (int g : kGroups) {
    if (!out.empty()) out += '-';
    out += raw.substr(at, g);
    at += g;
  }
  return out;
}

Status ParseThinPoolStatus(const std::string& status, double* data_percent, double* metadata_percent) {
  std::istringstream in(status);
  uint64_t transaction = 0, meta_used = 0, meta_total = 0, data_used = 0, data_total = 0;
  char slash1 = 0, slash2 = 0;
  std::string held_root, mode;
  if (status.rfind("Fail", 0) == 0 || status.rfind("Error", 0) == 0)
    return Status::FailedPrecondition("has failed (device-mapper status \"" + status.substr(0, 40) +
                                      "\"; an I/O error under it? see the kernel log): once its disks are whole, "
                                      "deactivate it and repair it (lvconvert --repair)");
  in >> transaction >> meta_used >> slash1 >> meta_total >> data_used >> slash2 >> data_total;
  if (!in || slash1 != '/' || slash2 != '/' || meta_total == 0 || data_total == 0 || meta_used > meta_total ||
      data_used > data_total)
    return Status::Internal("thin-pool status \"" + status.substr(0, 80) + "\" is not a healthy pool's");
  if (in >> held_root >> mode && mode == "ro")
    return Status::FailedPrecondition("is read-only (device-mapper's read-only mode after a metadata error; see the "
                                      "kernel log): deactivate it and repair it (lvconvert --repair)");
  *data_percent = 100.0 * static_cast<double>(data_used) / static_cast<double>(data_total);
  *metadata_percent = 100.0 * static_cast<double>(meta_used) / static_cast<double>(meta_total);
  return Status::Ok();
}

std::shared_ptr<LvmProbe> MakeLvmProbe() { return std::make_shared<DevProbe>(); }

}  // namespace nodevol
