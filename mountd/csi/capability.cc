#include "csi/capability.h"

namespace nodevol::csi {

using Mode = ::csi::v1::VolumeCapability::AccessMode;

Status ParseCapability(const ::csi::v1::VolumeCapability& cap, Access* out) {
  if (!cap.has_block() && !cap.has_mount())
    return Status::InvalidArgument("volume capability has neither a mount nor a block access type");
  if (!cap.has_access_mode() || cap.access_mode().mode() == Mode::UNKNOWN)
    return Status::InvalidArgument("volume capability has no access mode");
  out->block = cap.has_block();
  Mode::Mode m = cap.access_mode().mode();
  out->read_only = m == Mode::SINGLE_NODE_READER_ONLY || m == Mode::MULTI_NODE_READER_ONLY;
  if (cap.has_mount()) {
    out->fs_type = cap.mount().fs_type();
    out->mount_flags.assign(cap.mount().mount_flags().begin(), cap.mount().mount_flags().end());
  }
  return Status::Ok();
}

std::string Unsupported(const std::string& kind, const ::csi::v1::VolumeCapability& cap) {
  if (cap.has_block() && kind != "lvm")
    return "raw block volumes come only from lvm pools; this pool is " + kind;
  Mode::Mode m = cap.access_mode().mode();
  bool multi_node = m == Mode::MULTI_NODE_READER_ONLY || m == Mode::MULTI_NODE_SINGLE_WRITER ||
                    m == Mode::MULTI_NODE_MULTI_WRITER;
  if (multi_node && kind != "nfs")
    return "access mode " + Mode::Mode_Name(m) + " needs a volume several nodes reach; a " + kind +
           " pool's volumes live on one node (use an nfs pool, or a single-node mode)";
  if (multi_node && cap.has_block()) return "raw block volumes are single-node";
  return "";
}

}  // namespace nodevol::csi
