// Block devices another driver or another machine may own: virtual
// devices (software RAID, network block devices, zvols, bcache, rbd,
// drbd, ...), LUNs reached over a network transport (iSCSI, Fibre
// Channel, NVMe over TCP/RDMA/FC) and the paths of a multipath device.
// Such a device can be attached for someone else at any time and read as
// blank until its owner writes to it, so disk rules never select it; only
// an exact /dev/disk/by-id path in devices= does (disks.h).
#pragma once

#include <string>

namespace nodevol {

// What udev and sysfs say about one block device (whole disk or partition).
struct DeviceFacts {
  std::string sysname;         // vdb, nvme1n1, rbd0, sdc1
  std::string syspath;         // /sys/devices/...; partitions lie below their disk
  std::string nvme_transport;  // <ctrl>/transport of an NVMe namespace: pcie, tcp, rdma, fc, loop
  std::string id_path;         // udev ID_PATH, e.g. ip-10.0.0.1:3260-iscsi-iqn...-lun-0
  bool multipath_path = false; // udev DM_MULTIPATH_DEVICE_PATH=1, or its WWID in /etc/multipath/wwids
};

// "" for a local disk; otherwise what the device is, for the log, e.g.
// "a virtual block device (rbd)" or "an iSCSI LUN".
std::string ForeignReason(const DeviceFacts& f);

}  // namespace nodevol
