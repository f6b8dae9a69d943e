#include "controller/volume_view.h"

#include "controller/names.h"
#include "kube/fields.h"
#include "kube/quantity.h"

namespace nodevol::provisioner {

using kube::Obj;
using kube::Str;

VolumeView DecodeVolume(const nlohmann::json& pv) {
  VolumeView v;
  const auto& meta = Obj(pv, "metadata");
  const auto& ann = Obj(meta, "annotations");
  const auto& spec = Obj(pv, "spec");
  v.name = Str(meta, "name");
  v.uid = Str(meta, "uid");
  v.resource_version = Str(meta, "resourceVersion");
  v.provisioned_by = Str(ann, kAnnProvisionedBy);
  v.node = Str(ann, kAnnNode);
  v.pool = Str(ann, kAnnPool);
  v.backend = Str(ann, kAnnBackend);
  v.reclaim_policy = Str(spec, "persistentVolumeReclaimPolicy");
  v.phase = Str(Obj(pv, "status"), "phase");
  v.class_name = Str(spec, "storageClassName");
  const auto& ref = Obj(spec, "claimRef");
  v.claim_ns = Str(ref, "namespace");
  v.claim_name = Str(ref, "name");
  v.claim_uid = Str(ref, "uid");
  kube::Quantity q;
  if (!kube::Quantity::Parse(Str(Obj(spec, "capacity"), "storage"), &q).ok() || !q.ToBytes(&v.capacity_bytes).ok())
    v.capacity_bytes = 0;
  v.deleting = meta.contains("deletionTimestamp") && !meta["deletionTimestamp"].is_null();
  if (auto f = meta.find("finalizers"); f != meta.end() && f->is_array())
    for (const auto& x : *f)
      if (x.is_string() && x.get<std::string>() == kFinalizer) v.our_finalizer = true;
  if (auto it = spec.find("csi"); it != spec.end() && it->is_object()) {
    v.csi = true;
    v.csi_driver = Str(*it, "driver");
    v.volume_handle = Str(*it, "volumeHandle");
  }
  return v;
}

}  // namespace nodevol::provisioner
