#include "controller/pv.h"

#include "controller/names.h"
#include "kube/quantity.h"

namespace nodevol::provisioner {

nlohmann::json BuildPersistentVolume(const PvPlan& p) {
  using nlohmann::json;
  json annotations = {{kAnnProvisionedBy, kProvisionerName},
                      {kAnnNode, p.node},
                      {kAnnPool, p.pool},
                      {kAnnBackend, p.backend}};
  // The pool: a node that did not make an NFS volume finds its record on
  // that pool's export (mountd/node/shared.cc).
  json options = {{"volume", p.claim.PvName()}, {"pool", p.pool}};
  std::string joined;
  for (const auto& o : p.mount_options) joined += (joined.empty() ? "" : ",") + o;
  // NFS volumes took the class's mount options at creation (the staging
  // mount); the others apply them when kubelet publishes.
  if (!joined.empty() && p.backend != "nfs") options["mountOptions"] = joined;
  json flex = {{"driver", kFlexDriver}, {"options", options}};
  if (!p.fs_type.empty()) flex["fsType"] = p.fs_type;
  // kubelet hands a CSI volume's attributes to NodePublishVolume as its
  // volume_context; the pool serves as the flex option does.
  json csi = {{"driver", kProvisionerName}, {"volumeHandle", p.claim.PvName()},
              {"volumeAttributes", {{"pool", p.pool}}}};
  if (!p.fs_type.empty()) csi["fsType"] = p.fs_type;

  json term;
  if (p.backend == "nfs") {
    json match = json::array({{{"key", p.node_label_key}, {"operator", "In"}, {"values", json::array({p.node_label_value})}}});
    if (!p.storage_label_key.empty())
      match.push_back({{"key", p.storage_label_key}, {"operator", "In"}, {"values", json::array({p.storage_label_value})}});
    term = {{"matchExpressions", match}};
  } else {
    term = {{"matchExpressions", json::array({{{"key", "kubernetes.io/hostname"}, {"operator", "In"},
                                               {"values", json::array({p.node})}}})}};
  }
  json spec = {
      {"capacity", {{"storage", kube::FormatBinaryBytes(p.bytes)}}},
      {"accessModes", p.claim.access_modes},
      {"volumeMode", p.claim.volume_mode},
      {"persistentVolumeReclaimPolicy", p.reclaim_policy},
      {"storageClassName", p.class_name},
      {"claimRef",
       {{"kind", "PersistentVolumeClaim"},
        {"apiVersion", "v1"},
        {"namespace", p.claim.ns},
        {"name", p.claim.name},
        {"uid", p.claim.uid},
        {"resourceVersion", p.claim.resource_version}}},
      {"nodeAffinity", {{"required", {{"nodeSelectorTerms", json::array({term})}}}}},
  };
  if (p.csi) spec["csi"] = csi;
  else spec["flexVolume"] = flex;
  // kubelet passes a CSI PV's mountOptions to every NodePublishVolume; an
  // NFS volume took them at creation (its staging mount), where a bind
  // could not apply them.
  if (!p.mount_options.empty() && !(p.csi && p.backend == "nfs")) spec["mountOptions"] = p.mount_options;
  json meta = {{"name", p.claim.PvName()}, {"annotations", annotations}};
  if (p.reclaim_policy == "Delete") meta["finalizers"] = json::array({kFinalizer});
  return {{"apiVersion", "v1"}, {"kind", "PersistentVolume"}, {"metadata", meta}, {"spec", spec}};
}

}  // namespace nodevol::provisioner
