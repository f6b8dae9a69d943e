// VolumeView: the parts of a PersistentVolume the provisioner acts on, read
// from its JSON; the volume cache keeps these, not the objects (a cached
// PV's JSON tree costs tens of KiB, this a few hundred bytes).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "controller/events.h"

namespace nodevol::provisioner {

struct VolumeView {
  std::string name, uid, resource_version;
  // Annotations: who provisioned it, and where its volume lives
  // (controller/pv.h).
  std::string provisioned_by, node, pool, backend;
  std::string reclaim_policy;  // spec.persistentVolumeReclaimPolicy
  std::string phase;           // status.phase
  std::string class_name;      // spec.storageClassName
  std::string claim_ns, claim_name, claim_uid;  // spec.claimRef
  uint64_t capacity_bytes = 0;  // spec.capacity.storage; 0 when unreadable
  bool csi = false;             // spec.csi, with its driver and handle
  std::string csi_driver, volume_handle;
  bool deleting = false;        // metadata.deletionTimestamp set
  bool our_finalizer = false;   // metadata.finalizers holds kFinalizer

  ObjectRef Ref() const { return {"PersistentVolume", "v1", "", name, uid, resource_version}; }
};

VolumeView DecodeVolume(const nlohmann::json& pv);

}  // namespace nodevol::provisioner
