#include "controller/claim.h"

#include "controller/names.h"
#include "kube/fields.h"
#include "kube/quantity.h"

namespace nodevol::provisioner {

using kube::Str;
using kube::StringMap;

namespace {

uint64_t StorageBytes(const nlohmann::json& holder) {
  kube::Quantity q;
  uint64_t n = 0;
  std::string text = Str(holder, "storage");
  if (text.empty() || !kube::Quantity::Parse(text, &q).ok() || !q.ToBytes(&n).ok()) return 0;
  return n;
}

}  // namespace

ClaimView DecodeClaim(const nlohmann::json& pvc) {
  ClaimView c;
  const auto& meta = kube::Obj(pvc, "metadata");
  const auto& spec = kube::Obj(pvc, "spec");
  const auto& status = kube::Obj(pvc, "status");
  c.ns = Str(meta, "namespace");
  c.name = Str(meta, "name");
  c.uid = Str(meta, "uid");
  c.resource_version = Str(meta, "resourceVersion");
  c.annotations = StringMap(kube::Obj(meta, "annotations"));
  c.annotations.erase(kAnnLastApplied);
  c.labels = StringMap(kube::Obj(meta, "labels"));
  c.deleting = meta.contains("deletionTimestamp") && !meta["deletionTimestamp"].is_null();
  if (auto it = c.annotations.find(kAnnBetaStorageClass); it != c.annotations.end()) {
    c.class_name = it->second, c.has_class = true;
  } else if (spec.contains("storageClassName") && spec["storageClassName"].is_string()) {
    c.class_name = spec["storageClassName"].get<std::string>(), c.has_class = true;
  }
  if (auto it = c.annotations.find(kAnnStorageProvisioner); it != c.annotations.end()) {
    c.provisioner = it->second;
  } else if (auto b = c.annotations.find(kAnnBetaStorageProvisioner); b != c.annotations.end()) {
    c.provisioner = b->second;
  }
  if (auto it = c.annotations.find(kAnnSelectedNode); it != c.annotations.end()) c.selected_node = it->second;
  c.volume_name = Str(spec, "volumeName");
  c.volume_mode = Str(spec, "volumeMode");
  if (c.volume_mode.empty()) c.volume_mode = "Filesystem";
  if (spec.contains("accessModes") && spec["accessModes"].is_array())
    for (const auto& m : spec["accessModes"])
      if (m.is_string()) c.access_modes.push_back(m.get<std::string>());
  const nlohmann::json* ref = &kube::Obj(spec, "dataSourceRef");
  if (ref->empty()) ref = &kube::Obj(spec, "dataSource");
  c.data_source = {Str(*ref, "kind"), Str(*ref, "apiGroup"), Str(*ref, "name"), Str(*ref, "namespace")};
  c.status_bytes = StorageBytes(kube::Obj(status, "capacity"));
  c.bound = kube::Str(status, "phase") == "Bound";
  if (auto it = status.find("conditions"); it != status.end() && it->is_array() && !it->empty()) c.conditions = *it;

  if (c.name.empty() || c.ns.empty() || c.uid.empty()) {
    c.error = Status::InvalidArgument("claim without namespace, name or uid");
    return c;
  }
  std::string request = Str(kube::Obj(kube::Obj(spec, "resources"), "requests"), "storage");
  if (request.empty()) {
    c.error = Status::InvalidArgument("claim " + c.Key() + " has no resources.requests.storage");
    return c;
  }
  kube::Quantity q;
  Status st = kube::Quantity::Parse(request, &q);
  if (!st.ok()) {
    c.error = Status::InvalidArgument("claim " + c.Key() + " requests storage \"" + request + "\": " + st.message());
    return c;
  }
  st = q.ToBytes(&c.request_bytes);
  if (!st.ok()) {
    c.error = st;
    return c;
  }
  if (c.request_bytes == 0) c.error = Status::InvalidArgument("claim " + c.Key() + " requests 0 bytes of storage");
  return c;
}

Status ParseClaim(const nlohmann::json& pvc, ClaimView* out) {
  *out = DecodeClaim(pvc);
  return out->error;
}

ClaimAction ShouldProvision(const ClaimView& c, const std::string& provisioner_name, const std::string& binding_mode,
                            std::string* reason) {
  auto ignore = [&](std::string why) {
    *reason = std::move(why);
    return ClaimAction::kIgnore;
  };
  if (c.deleting) return ignore("claim is being deleted");
  if (!c.volume_name.empty()) return ignore("claim already names volume " + c.volume_name);
  if (c.provisioner != provisioner_name)
    return ignore(c.provisioner.empty() ? "the PV controller has not handed the claim to a provisioner"
                                        : "claim is for provisioner " + c.provisioner);
  if (!c.has_class || c.class_name.empty()) return ignore("claim has no storage class");
  if (binding_mode == "WaitForFirstConsumer" && c.selected_node.empty())
    return ignore("class waits for the first consumer and no node is selected yet");
  return ClaimAction::kProvision;
}

}  // namespace nodevol::provisioner
