#include "controller/data_source.h"

#include "base/size.h"
#include "controller/names.h"
#include "kube/quantity.h"
#include "snapshots/handle.h"
#include "snapshots/names.h"

namespace nodevol::provisioner {
namespace {

using nlohmann::json;

Status FromSnapshot(ControllerContext& ctx, const ClaimView& claim, const std::string& name, VolumeSource* out) {
  out->kind = VolumeSource::Kind::kSnapshot;
  out->description = "VolumeSnapshot " + claim.ns + "/" + name;
  json snap;
  auto r = ctx.client->Get(std::string(kSnapshotApi) + "/namespaces/" + claim.ns + "/volumesnapshots/" + name, &snap);
  if (r.code() == kube::Result::Code::kNotFound)
    return Status::NotFound(out->description + " does not exist (yet); the claim waits for it");
  if (!r.ok()) return Status::Unavailable("reading " + out->description + ": " + r.ToString());
  const json meta = snap.value("metadata", json::object());
  if (meta.contains("deletionTimestamp") && !meta["deletionTimestamp"].is_null())
    return Status::InvalidArgument(out->description + " is being deleted");
  const json status = snap.value("status", json::object());
  std::string content_name = status.value("boundVolumeSnapshotContentName", "");
  if (!status.value("readyToUse", false) || content_name.empty())
    return Status::FailedPrecondition(out->description + " is not ready to use yet; the claim waits for it");
  json content;
  r = ctx.client->Get(std::string(kSnapshotApi) + "/volumesnapshotcontents/" + content_name, &content);
  if (!r.ok()) return Status::Unavailable("reading VolumeSnapshotContent " + content_name + ": " + r.ToString());
  const json spec = content.value("spec", json::object());
  std::string driver = spec.value("driver", "");
  if (!ctx.options.Serves(driver))
    return Status::InvalidArgument(out->description + " is a snapshot of driver " + driver +
                                   "; nodevol restores only its own snapshots");
  // The content must name this snapshot back: a content bound to another
  // VolumeSnapshot is not this one's data.
  const json ref = spec.value("volumeSnapshotRef", json::object());
  if (ref.value("uid", "") != meta.value("uid", "") || ref.value("namespace", "") != claim.ns ||
      ref.value("name", "") != name)
    return Status::InvalidArgument(out->description + " names VolumeSnapshotContent " + content_name +
                                   ", which is bound to another VolumeSnapshot");
  const json cstatus = content.value("status", json::object());
  SnapshotHandle h;
  NODEVOL_RETURN_IF_ERROR(ParseSnapshotHandle(cstatus.value("snapshotHandle", ""), &h));
  out->node = h.node;
  out->name = h.name;
  if (cstatus.contains("restoreSize") && cstatus["restoreSize"].is_number_integer())
    out->min_bytes = std::max<int64_t>(0, cstatus["restoreSize"].get<int64_t>());
  return Status::Ok();
}

Status FromClaim(ControllerContext& ctx, const ClaimView& claim, const std::string& name, VolumeSource* out) {
  out->kind = VolumeSource::Kind::kVolume;
  out->description = "claim " + claim.ns + "/" + name;
  auto src = ctx.claims->Get(claim.ns + "/" + name);
  if (!src) return Status::NotFound(out->description + " does not exist (yet); the claim waits for it");
  ClaimView s;
  NODEVOL_RETURN_IF_ERROR(ParseClaim(*src, &s));
  if (s.class_name != claim.class_name)
    return Status::InvalidArgument("a clone must have its source's storage class: " + out->description +
                                   " is of class " + s.class_name + ", this claim of " + claim.class_name);
  if (s.volume_mode != claim.volume_mode)
    return Status::InvalidArgument("a clone must have its source's volumeMode: " + out->description + " is " +
                                   s.volume_mode + ", this claim " + claim.volume_mode);
  if (s.volume_name.empty())
    return Status::FailedPrecondition(out->description + " is not bound yet; the claim waits for it");
  auto pv = ctx.volumes->Get(s.volume_name);
  if (!pv) return Status::FailedPrecondition(out->description + "'s PV " + s.volume_name + " is not known yet");
  const json ann = (*pv)["metadata"].value("annotations", json::object());
  if (!ctx.options.Serves(ann.value(kAnnProvisionedBy, "")))
    return Status::InvalidArgument(out->description + " is not a nodevol volume");
  out->node = ann.value(kAnnNode, "");
  out->name = s.volume_name;
  if (ann.value(kAnnBackend, "") == "nfs" || out->node.empty())
    return Status::InvalidArgument(out->description + " is an NFS volume, which nodevol cannot clone "
                                   "(docs/snapshots.md)");
  std::string cap = (*pv)["spec"].value("capacity", json::object()).value("storage", "");
  kube::Quantity q;
  if (kube::Quantity::Parse(cap, &q).ok()) (void)q.ToBytes(&out->min_bytes);
  return Status::Ok();
}

}  // namespace

Status ResolveDataSource(ControllerContext& ctx, const json& pvc, const ClaimView& claim, VolumeSource* out) {
  *out = VolumeSource{};
  const json spec = pvc.value("spec", json::object());
  json ref = spec.value("dataSourceRef", json());
  if (!ref.is_object()) ref = spec.value("dataSource", json());
  if (!ref.is_object()) return Status::Ok();
  std::string kind = ref.value("kind", ""), group = ref.value("apiGroup", ""), name = ref.value("name", "");
  std::string ns = ref.value("namespace", "");
  if (!ns.empty() && ns != claim.ns)
    return Status::InvalidArgument("data source " + kind + " " + ns + "/" + name +
                                   " is in another namespace; nodevol restores and clones within one namespace");
  Status st;
  if (kind == "VolumeSnapshot" && group == kSnapshotApiGroup) st = FromSnapshot(ctx, claim, name, out);
  else if (kind == "PersistentVolumeClaim" && group.empty()) st = FromClaim(ctx, claim, name, out);
  else
    return Status::Unimplemented("data source " + kind + (group.empty() ? "" : "." + group) +
                                 " is not one nodevol fills (a volume populator's?)");
  NODEVOL_RETURN_IF_ERROR(st);
  if (claim.request_bytes < out->min_bytes)
    return Status::InvalidArgument("claim requests " + FormatSize(claim.request_bytes) + " but " + out->description +
                                   " needs at least " + FormatSize(out->min_bytes) + "; ask for at least that");
  return Status::Ok();
}

}  // namespace nodevol::provisioner
