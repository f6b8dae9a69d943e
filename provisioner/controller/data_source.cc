#include "controller/data_source.h"

#include "base/size.h"
#include "controller/bound_volume.h"
#include "controller/names.h"
#include "kube/fields.h"
#include "snapshots/handle.h"
#include "snapshots/names.h"

namespace nodevol::provisioner {
namespace {

using nlohmann::json;
using kube::Bool;
using kube::Obj;
using kube::Str;

Status FromSnapshot(ControllerContext& ctx, const ClaimView& claim, const std::string& name, VolumeSource* out) {
  out->kind = VolumeSource::Kind::kSnapshot;
  out->description = "VolumeSnapshot " + claim.ns + "/" + name;
  json snap;
  auto r = ctx.client->Get(std::string(kSnapshotApi) + "/namespaces/" + claim.ns + "/volumesnapshots/" + name, &snap);
  if (r.code() == kube::Result::Code::kNotFound)
    return Status::NotFound(out->description + " does not exist (yet); the claim waits for it");
  if (!r.ok()) return Status::Unavailable("reading " + out->description + ": " + r.ToString());
  const json meta = Obj(snap, "metadata");
  if (meta.contains("deletionTimestamp") && !meta["deletionTimestamp"].is_null())
    return Status::InvalidArgument(out->description + " is being deleted");
  const json status = Obj(snap, "status");
  std::string content_name = Str(status, "boundVolumeSnapshotContentName");
  if (!Bool(status, "readyToUse") || content_name.empty())
    return Status::FailedPrecondition(out->description + " is not ready to use yet; the claim waits for it");
  json content;
  r = ctx.client->Get(std::string(kSnapshotApi) + "/volumesnapshotcontents/" + content_name, &content);
  if (!r.ok()) return Status::Unavailable("reading VolumeSnapshotContent " + content_name + ": " + r.ToString());
  const json spec = Obj(content, "spec");
  std::string driver = Str(spec, "driver");
  if (!ctx.options.Serves(driver))
    return Status::InvalidArgument(out->description + " is a snapshot of driver " + driver +
                                   "; nodevol restores only its own snapshots");
  // The content must name this snapshot back: a content bound to another
  // VolumeSnapshot is not this one's data.
  const json ref = Obj(spec, "volumeSnapshotRef");
  if (Str(ref, "uid") != Str(meta, "uid") || Str(ref, "namespace") != claim.ns ||
      Str(ref, "name") != name)
    return Status::InvalidArgument(out->description + " names VolumeSnapshotContent " + content_name +
                                   ", which is bound to another VolumeSnapshot");
  // As external-provisioner's prevent-volume-mode-conversion: a snapshot
  // of a raw block volume is not restored as a filesystem (or back)
  // unless the content's owner allows it.
  std::string source_mode = Str(spec, "sourceVolumeMode");
  bool allowed = Str(Obj(Obj(content, "metadata"), "annotations"),
                     "snapshot.storage.kubernetes.io/allow-volume-mode-change") == "true";
  if (!source_mode.empty() && source_mode != claim.volume_mode && !allowed)
    return Status::InvalidArgument(out->description + " is of a volumeMode " + source_mode + " volume; this claim is " +
                                   claim.volume_mode);
  const json cstatus = Obj(content, "status");
  SnapshotHandle h;
  NODEVOL_RETURN_IF_ERROR(ParseSnapshotHandle(Str(cstatus, "snapshotHandle"), &h));
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
  NODEVOL_RETURN_IF_ERROR(src->error);
  const ClaimView& s = *src;
  if (s.class_name != claim.class_name)
    return Status::InvalidArgument("a clone must have its source's storage class: " + out->description +
                                   " is of class " + s.class_name + ", this claim of " + claim.class_name);
  if (s.volume_mode != claim.volume_mode)
    return Status::InvalidArgument("a clone must have its source's volumeMode: " + out->description + " is " +
                                   s.volume_mode + ", this claim " + claim.volume_mode);
  std::shared_ptr<const VolumeView> pv;
  if (Status bound = BoundVolume(ctx, s, &pv); !bound.ok()) {
    if (bound.code() == Status::Code::kFailedPrecondition)
      return Status::FailedPrecondition(bound.message() + "; the claim waits for it");
    return Status::InvalidArgument("cannot clone " + out->description + ": " + bound.message());
  }
  if (!ctx.options.Serves(pv->provisioned_by))
    return Status::InvalidArgument(out->description + " is not a nodevol volume");
  out->node = pv->node;
  out->name = s.volume_name;
  if (pv->backend == "nfs" || out->node.empty())
    return Status::InvalidArgument(out->description + " is an NFS volume, which nodevol cannot clone "
                                   "(docs/snapshots.md)");
  out->min_bytes = pv->capacity_bytes;
  return Status::Ok();
}

}  // namespace

Status ResolveDataSource(ControllerContext& ctx, const ClaimView& claim, VolumeSource* out) {
  *out = VolumeSource{};
  const auto& ref = claim.data_source;
  if (ref.kind.empty() && ref.name.empty()) return Status::Ok();
  const std::string& kind = ref.kind;
  const std::string& group = ref.api_group;
  const std::string& name = ref.name;
  const std::string& ns = ref.ns;
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
