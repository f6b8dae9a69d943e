// ClassParams: what a nodevol StorageClass's `parameters` and
// `mountOptions` ask for, checked before anything is created. An unknown
// key or a bad value is INVALID_ARGUMENT naming the parameter, so the claim
// gets one clear ProvisioningFailed event instead of a retry storm.
//
//   backend      lvm | nfs | dir (optional: pools are found by name; when
//                given, a node's pool must also be of this kind)
//   pool         pool name on the nodes (required)
//   fsType       lvm only: ext4 | xfs ("" = the pool's default)
//   mode, uid, gid                 root directory of a new volume
//   nfs only: server, share, pathPattern (alias subDir), onDelete
//             (delete | retain | archive), archiveOnDelete (true | false)
//   volumeSource  csi (default) | flexVolume: the PV's source, i.e. which of
//                 nodevold's front doors kubelet uses (docs/csi.md)
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace nodevol::provisioner {

struct ClassParams {
  std::string backend;  // "" = any
  std::string pool;
  std::string fs_type;
  // Passed through to CreateVolume as volume parameters (mode, uid, gid,
  // the NFS keys).
  std::map<std::string, std::string> volume_params;
  // The class's mountOptions, each checked to survive comma-joining: NFS
  // volumes take them at creation (they shape the staging mount), the
  // others at publication (the PV's flexVolume option mountOptions).
  std::vector<std::string> mount_options;
  // spec.csi PVs by default: FlexVolume is in maintenance since Kubernetes
  // 1.23, raw block and snapshots exist only for CSI volumes, and nodevold
  // registers its CSI driver with kubelet by itself. flexVolume stays for
  // clusters that keep nodevold's CSI front door off (--csi=off).
  std::string volume_source = "csi";
  bool volume_source_given = false;  // the class says which
  bool IsNfs() const { return backend == "nfs"; }
  bool IsCsi() const { return volume_source == "csi"; }
};

Status ParseClassParams(const std::map<std::string, std::string>& parameters,
                        const std::vector<std::string>& mount_options, ClassParams* out);

}  // namespace nodevol::provisioner
