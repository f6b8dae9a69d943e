// The PersistentVolume the provisioner saves for a provisioned claim
// (provisioner-contract.md §1): name pvc-<claim uid>, claimRef with the
// claim's uid and resourceVersion, capacity (the volume's real size),
// access modes, volume mode, reclaim policy and mount options from the
// class, provisioned-by, our finalizer for reclaim Delete, annotations
// naming node, pool and backend (so deletion works after the class is
// gone), a CSI source (driver nodevol.io, volumeHandle = the volume's name,
// volumeAttributes.pool) or a flexVolume one (driver nodevol.io/volume,
// options volume and pool), and node affinity: kubernetes.io/hostname of the volume's node, or for NFS
// the node label marking nodes that run nodevold.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "controller/claim.h"

namespace nodevol::provisioner {

struct PvPlan {
  ClaimView claim;
  std::string class_name;
  std::string reclaim_policy = "Delete";
  std::vector<std::string> mount_options;  // the class's
  std::string node;                        // where the volume was created
  std::string pool, backend, fs_type;
  uint64_t bytes = 0;  // the created volume's size
  // NFS: nodes carrying this label (key=value), and the storage-node
  // label when its key is set, may mount the volume.
  std::string node_label_key, node_label_value;
  std::string storage_label_key, storage_label_value;
  bool csi = true;  // spec.csi, else spec.flexVolume
};

nlohmann::json BuildPersistentVolume(const PvPlan& plan);

}  // namespace nodevol::provisioner
