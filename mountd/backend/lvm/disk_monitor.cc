// The kernel's block devices through libudev (disks.h): ListDisks at a
// moment, DiskMonitor as they are added. Both describe a device the same
// way (DescribeDevice). Without udevd, libudev has only the kernel's
// properties, so model and serial fall back to sysfs attributes.
#include <libudev.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "backend/lvm/disks.h"
#include "backend/lvm/foreign.h"

namespace nodevol {
namespace {

std::string Trim(std::string s) {
  const char* space = " \t\r\n";
  s.erase(0, std::min(s.size(), s.find_first_not_of(space)));
  size_t end = s.find_last_not_of(space);
  s.erase(end == std::string::npos ? 0 : end + 1);
  return s;
}

std::string Attr(udev_device* dev, const char* name) {
  const char* v = udev_device_get_sysattr_value(dev, name);
  return v ? Trim(v) : "";
}

std::string Prop(udev_device* dev, const char* name) {
  const char* v = udev_device_get_property_value(dev, name);
  return v ? Trim(v) : "";
}

// The unit serial number from SCSI VPD page 0x80 (binary: 4 header bytes,
// then the serial in ASCII), when it is plain printable text.
std::string VpdSerial(udev_device* disk) {
  const char* syspath = udev_device_get_syspath(disk);
  if (!syspath) return "";
  std::ifstream in(std::string(syspath) + "/device/vpd_pg80", std::ios::binary);
  std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (page.size() < 4 || static_cast<unsigned char>(page[1]) != 0x80) return "";
  size_t len = (static_cast<unsigned char>(page[2]) << 8) | static_cast<unsigned char>(page[3]);
  if (page.size() < 4 + len) return "";
  std::string serial = page.substr(4, len);
  for (char c : serial)
    if (c < 0x20 || c > 0x7e) return "";
  return Trim(serial);
}

bool StartsWith(const char* s, const char* prefix) { return std::strncmp(s, prefix, std::strlen(prefix)) == 0; }

// Whether multipath has claimed this WWID (/etc/multipath/wwids lines are
// "/<wwid>/"): multipathd may assemble its map only after the path shows
// up, so an empty holders directory proves nothing.
bool InMultipathWwids(const std::string& wwid) {
  if (wwid.empty()) return false;
  std::ifstream in("/etc/multipath/wwids");
  std::string line;
  while (std::getline(in, line))
    if (line == "/" + wwid + "/") return true;
  return false;
}

std::string Foreign(udev_device* dev, udev_device* disk, const char* sysname) {
  DeviceFacts f;
  f.sysname = sysname;
  const char* syspath = udev_device_get_syspath(dev);
  f.syspath = syspath ? syspath : "";
  if (StartsWith(udev_device_get_sysname(disk), "nvme")) f.nvme_transport = Attr(disk, "device/transport");
  f.id_path = Prop(dev, "ID_PATH");
  f.multipath_path = Prop(dev, "DM_MULTIPATH_DEVICE_PATH") == "1" || Prop(dev, "ID_FS_TYPE") == "mpath_member" ||
                     InMultipathWwids(Prop(disk, "ID_SERIAL")) || InMultipathWwids(Attr(disk, "device/wwid"));
  return ForeignReason(f);
}

// Fills `out` for a whole disk or partition nodevold may consider; false
// for anything else (device-mapper, loop, ram, zram, optical, empty).
// Devices of other drivers or machines are described, with d.foreign set.
bool DescribeDevice(udev_device* dev, DiskInfo* out) {
  const char* devtype = udev_device_get_devtype(dev);
  const char* sysname = udev_device_get_sysname(dev);
  if (!devtype || !sysname) return false;
  const bool partition = std::strcmp(devtype, "partition") == 0;
  if (!partition && std::strcmp(devtype, "disk") != 0) return false;
  for (const char* skip : {"dm-", "loop", "ram", "zram", "sr"})
    if (StartsWith(sysname, skip)) return false;
  // Owned by `dev`: not unref'ed.
  udev_device* disk = partition ? udev_device_get_parent_with_subsystem_devtype(dev, "block", "disk") : dev;
  if (!disk) return false;

  DiskInfo d;
  d.partition = partition;
  const char* devnode = udev_device_get_devnode(dev);
  d.devnode = devnode ? devnode : std::string("/dev/") + sysname;
  d.devnum = udev_device_get_devnum(dev);
  d.size = std::strtoull(Attr(dev, "size").c_str(), nullptr, 10) * 512;  // always 512-byte sectors
  if (d.size == 0) return false;
  d.foreign = Foreign(dev, disk, sysname);
  d.read_only = Attr(dev, "ro") == "1";
  d.rotational = Attr(disk, "queue/rotational") == "1";
  // udevd's names when it runs (it copies the disk's to partitions), else
  // sysfs: virtio has <disk>/serial, NVMe and some SCSI device/serial.
  d.model = Prop(dev, "ID_MODEL");
  if (d.model.empty()) d.model = Attr(disk, "device/model");
  d.serial = Prop(dev, "ID_SERIAL_SHORT");
  if (d.serial.empty()) d.serial = Attr(disk, "serial");
  if (d.serial.empty()) d.serial = Attr(disk, "device/serial");
  if (d.serial.empty()) d.serial = VpdSerial(disk);
  if (d.serial.empty()) d.serial = Prop(dev, "ID_SERIAL");
  for (udev_list_entry* l = udev_device_get_devlinks_list_entry(dev); l; l = udev_list_entry_get_next(l)) {
    const char* link = udev_list_entry_get_name(l);
    if (link && StartsWith(link, "/dev/disk/by-id/")) d.links.push_back(link);
  }
  std::sort(d.links.begin(), d.links.end());
  *out = std::move(d);
  return true;
}

}  // namespace

Status ListDisks(std::vector<DiskInfo>* out) {
  out->clear();
  udev* u = udev_new();
  if (!u) return Status::FromErrno("libudev: udev_new", errno);
  udev_enumerate* e = udev_enumerate_new(u);
  if (!e) {
    udev_unref(u);
    return Status::FromErrno("libudev: udev_enumerate_new", errno);
  }
  int rc = udev_enumerate_add_match_subsystem(e, "block");
  if (rc >= 0) rc = udev_enumerate_scan_devices(e);
  if (rc >= 0) {
    for (udev_list_entry* l = udev_enumerate_get_list_entry(e); l; l = udev_list_entry_get_next(l)) {
      udev_device* dev = udev_device_new_from_syspath(u, udev_list_entry_get_name(l));
      if (!dev) continue;  // gone meanwhile
      DiskInfo d;
      if (DescribeDevice(dev, &d)) out->push_back(std::move(d));
      udev_device_unref(dev);
    }
  }
  udev_enumerate_unref(e);
  udev_unref(u);
  if (rc < 0) return Status::FromErrno("libudev: listing block devices", -rc);
  std::sort(out->begin(), out->end(), [](const DiskInfo& a, const DiskInfo& b) { return a.devnode < b.devnode; });
  return Status::Ok();
}

Status DiskMonitor::Start(OnAdd on_add, std::unique_ptr<DiskMonitor>* out) {
  std::unique_ptr<DiskMonitor> m(new DiskMonitor());
  m->on_add_ = std::move(on_add);
  udev* u = udev_new();
  if (!u) return Status::FromErrno("libudev: udev_new", errno);
  m->udev_ = u;
  // udevd's events come after its rules ran (by-id links exist); without
  // udevd, the kernel's (devtmpfs has made the node by then).
  const bool udevd = access("/run/udev/control", F_OK) == 0;
  udev_monitor* mon = udev_monitor_new_from_netlink(u, udevd ? "udev" : "kernel");
  if (!mon) return Status::FromErrno("libudev: cannot open the netlink monitor", errno);
  m->monitor_ = mon;
  int rc = udev_monitor_filter_add_match_subsystem_devtype(mon, "block", nullptr);
  if (rc < 0) return Status::FromErrno("libudev: monitor filter", -rc);
  udev_monitor_set_receive_buffer_size(mon, 4 << 20);  // best effort: fewer lost events in a burst
  rc = udev_monitor_enable_receiving(mon);
  if (rc < 0) return Status::FromErrno("libudev: cannot listen for block device events", -rc);
  m->stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (m->stop_fd_ < 0) return Status::FromErrno("eventfd", errno);
  try {
    m->thread_ = std::thread(&DiskMonitor::Loop, m.get());
  } catch (const std::exception& e) {
    return Status::Internal(std::string("cannot start the disk monitor thread: ") + e.what());
  }
  spdlog::info("watching for new block devices ({} events)", udevd ? "udevd's" : "the kernel's");
  *out = std::move(m);
  return Status::Ok();
}

void DiskMonitor::Loop() {
  auto* mon = static_cast<udev_monitor*>(monitor_);
  pollfd fds[2] = {{udev_monitor_get_fd(mon), POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  for (;;) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("disk monitor stopped: poll: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents) return;
    if (fds[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {
      spdlog::error("disk monitor stopped: the netlink socket failed");
      return;
    }
    if (!(fds[0].revents & POLLIN)) continue;
    udev_device* dev = udev_monitor_receive_device(mon);  // null for filtered-out messages
    if (!dev) continue;
    const char* action = udev_device_get_action(dev);
    DiskInfo d;
    if (action && std::strcmp(action, "add") == 0 && DescribeDevice(dev, &d)) {
      spdlog::debug("block device added: {} (serial {}, {} bytes)", d.devnode, d.serial, d.size);
      try {
        on_add_(d);
      } catch (const std::exception& e) {
        spdlog::error("handling the new block device {} failed: {}", d.devnode, e.what());
      } catch (...) {
        spdlog::error("handling the new block device {} failed", d.devnode);
      }
    }
    udev_device_unref(dev);
  }
}

void DiskMonitor::Stop() {
  if (!thread_.joinable()) return;
  uint64_t one = 1;
  if (write(stop_fd_, &one, sizeof one) < 0) spdlog::error("disk monitor: cannot signal stop: {}", std::strerror(errno));
  // From on_add (the monitor's own thread): the loop ends once on_add
  // returns, and the destructor, which must run on another thread, joins.
  if (thread_.get_id() == std::this_thread::get_id()) return;
  thread_.join();
}

DiskMonitor::~DiskMonitor() {
  Stop();
  if (monitor_) udev_monitor_unref(static_cast<udev_monitor*>(monitor_));
  if (udev_) udev_unref(static_cast<udev*>(udev_));
  if (stop_fd_ >= 0) close(stop_fd_);
}

}  // namespace nodevol
