#include "snapshots/content.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

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
using Outcome = Workers::Outcome;

// A CreateSnapshot that ended so may still be running on the node (the
// sidecar's isCSIFinalError, less RESOURCE_EXHAUSTED: nodevold's "no room"
// is definite and leaves nothing behind).
bool MayStillRun(Status::Code c) {
  return c == Status::Code::kUnavailable || c == Status::Code::kDeadlineExceeded ||
         c == Status::Code::kCancelled || c == Status::Code::kAborted;
}

class ContentPass {
 public:
  ContentPass(ControllerContext& ctx, json content) : ctx_(ctx), content_(std::move(content)) {
    // Events need the kind, which list items lack.
    content_["kind"] = "VolumeSnapshotContent";
    content_["apiVersion"] = "snapshot.storage.k8s.io/v1";
    name_ = Str(Obj(content_, "metadata"), "name");
  }
  Outcome Run();

 private:
  const json& meta() const { return Obj(content_, "metadata"); }
  const json& spec() const { return Obj(content_, "spec"); }
  const json& status() const { return Obj(content_, "status"); }
  bool Deleting() const { return meta().contains("deletionTimestamp") && !meta()["deletionTimestamp"].is_null(); }
  bool HasAnnotation(const char* key) const { return Obj(meta(), "annotations").contains(key); }
  std::string Path() const { return std::string(kSnapshotApi) + "/volumesnapshotcontents/" + name_; }

  bool ShouldDelete() const;
  Outcome Delete();
  Outcome Create();
  Outcome CheckStatic();
  // A create that may have run (kAnnBeingCreated) whose source PV is gone:
  // the snapshot, looked for where the create went, is this content's, or
  // there is none and the annotations go.
  Outcome SettleUncertainCreate(const std::string& uid, const std::string& source, const Status& why);
  // Status fields of a snapshot the node has: handle, readyToUse, times.
  Status WriteStatus(const SnapshotHandle& h, const v1::Snapshot& s);
  // status.error (unless the same message is there) and a Warning event.
  Outcome Failed(const std::string& reason, const std::string& message);
  Status SetAnnotation(const char* key, const char* value);  // value null: remove
  Status SetAnnotations(const json& annotations);            // null values remove
  // The create is settled: being-created and where it went both go.
  Status ClearBeingCreated() { return SetAnnotations({{kAnnBeingCreated, nullptr}, {kAnnSnapshotNode, nullptr}}); }
  std::shared_ptr<nodes::NodeClient> Client(const std::string& node, Status* st);
  // The node and volume name of the PV whose CSI volumeHandle is `handle`.
  Status SourceOf(const std::string& handle, std::string* node);

  ControllerContext& ctx_;
  json content_;
  std::string name_;
};

bool ContentPass::ShouldDelete() const {
  if (!Deleting()) return false;
  // A static content no VolumeSnapshot ever bound.
  if (Obj(spec(), "source").contains("snapshotHandle") &&
      Str(Obj(spec(), "volumeSnapshotRef"), "uid").empty())
    return true;
  if (HasAnnotation(kAnnBeingCreated)) return false;
  return HasAnnotation(kAnnBeingDeleted);
}

std::shared_ptr<nodes::NodeClient> ContentPass::Client(const std::string& node, Status* st) {
  auto client = ctx_.node_view->Client(node);
  if (!client) *st = Status::Unavailable("node " + node + " runs no nodevold the provisioner knows of (yet)");
  return client;
}

Status ContentPass::SetAnnotation(const char* key, const char* value) {
  return SetAnnotations({{key, value ? json(value) : json(nullptr)}});
}

Status ContentPass::SetAnnotations(const json& annotations) {
  json patch = {{"metadata", {{"annotations", annotations}}}};
  json out;
  auto r = ctx_.client->MergePatch(Path(), patch, &out);
  if (!r.ok()) return Status::Unavailable("annotating VolumeSnapshotContent " + name_ + ": " + r.ToString());
  if (out.is_object() && out.contains("metadata")) content_["metadata"] = out["metadata"];
  return Status::Ok();
}

Outcome ContentPass::Failed(const std::string& reason, const std::string& message) {
  ctx_.events->Record(content_, "Warning", reason, message);
  json st = status();
  if (Str(Obj(st, "error"), "message") != message) {
    json patch = {{"status", {{"readyToUse", false}, {"error", {{"time", NowRfc3339()}, {"message", message}}}}}};
    auto r = ctx_.client->MergePatch(Path() + "/status", patch);
    if (!r.ok()) spdlog::warn("VolumeSnapshotContent {}: writing its error: {}", name_, r.ToString());
  }
  return Outcome::kRetry;
}

Status ContentPass::WriteStatus(const SnapshotHandle& h, const v1::Snapshot& s) {
  json st = status();
  json patch = json::object();
  std::string handle = FormatSnapshotHandle(h);
  bool ready = s.state() == v1::VOLUME_STATE_READY;
  if (Str(st, "snapshotHandle") != handle) patch["snapshotHandle"] = handle;
  if (!st.contains("readyToUse") || st["readyToUse"] != ready) patch["readyToUse"] = ready;
  if (!st.contains("creationTime"))
    patch["creationTime"] = static_cast<int64_t>(s.created_unix()) * 1000000000LL;
  if (!st.contains("restoreSize") && s.size_bytes() > 0) patch["restoreSize"] = static_cast<int64_t>(s.size_bytes());
  if (ready && st.contains("error")) patch["error"] = nullptr;
  if (patch.empty()) return Status::Ok();
  auto r = ctx_.client->MergePatch(Path() + "/status", {{"status", patch}});
  if (!r.ok()) return Status::Unavailable("writing the status of VolumeSnapshotContent " + name_ + ": " + r.ToString());
  for (auto& [k, v] : patch.items()) content_["status"][k] = v;
  return Status::Ok();
}

Status ContentPass::SourceOf(const std::string& handle, std::string* node) {
  // Our PVs are named by their volume handle (controller/pv.h).
  auto pv = ctx_.volumes->Get(handle);
  if (!pv || !pv->csi || pv->volume_handle != handle || !ctx_.options.Serves(pv->csi_driver))
    return Status::NotFound("no nodevol CSI PersistentVolume has volume handle " + handle +
                            " (a flexVolume PV cannot be snapshotted: the snapshot API needs spec.csi)");
  *node = pv->node;
  if (node->empty()) return Status::NotFound("PersistentVolume " + handle + " names no node (" + kAnnNode + ")");
  return Status::Ok();
}

Outcome ContentPass::Delete() {
  std::string handle = Str(status(), "snapshotHandle");
  if (Str(spec(), "deletionPolicy") == "Delete" && !handle.empty()) {
    SnapshotHandle h;
    Status st = ParseSnapshotHandle(handle, &h);
    if (!st.ok()) return Failed("SnapshotDeleteError", st.message());
    v1::DeleteSnapshotResponse resp;
    if (auto client = Client(h.node, &st)) {
      v1::DeleteSnapshotRequest req;
      req.set_name(h.name);
      st = client->DeleteSnapshot(req, &resp);
    }
    if (ctx_.metrics) ctx_.metrics->SnapshotOperation("delete", st.ok());
    if (!st.ok()) return Failed("SnapshotDeleteError", "deleting snapshot " + handle + ": " + st.message());
    spdlog::info("VolumeSnapshotContent {}: snapshot {} {}", name_, handle,
                 resp.existed() ? "deleted" : "was already gone");
    // As the sidecar does: no handle left to delete twice.
    json patch = {{"status", {{"snapshotHandle", nullptr}, {"readyToUse", nullptr}, {"creationTime", nullptr},
                              {"restoreSize", nullptr}}}};
    auto r = ctx_.client->MergePatch(Path() + "/status", patch);
    if (!r.ok() && r.code() != kube::Result::Code::kNotFound) {
      spdlog::warn("VolumeSnapshotContent {}: clearing its status: {}", name_, r.ToString());
      return Outcome::kRetry;
    }
  }
  json rest = json::array();
  bool had = false;
  for (const auto& f : kube::Strings(meta().value("finalizers", json::array()))) {
    if (f == kContentFinalizer) had = true;
    else rest.push_back(f);
  }
  if (!had) return Outcome::kDone;
  // resourceVersion: a finalizer added meanwhile is not dropped blindly.
  json patch = {{"metadata", {{"resourceVersion", Str(meta(), "resourceVersion")}, {"finalizers", rest}}}};
  auto r = ctx_.client->MergePatch(Path(), patch);
  if (r.ok() || r.code() == kube::Result::Code::kNotFound) return Outcome::kDone;
  spdlog::warn("VolumeSnapshotContent {}: removing finalizer: {}", name_, r.ToString());
  return Outcome::kRetry;
}

Outcome ContentPass::Create() {
  const json ref = Obj(spec(), "volumeSnapshotRef");
  std::string uid = Str(ref, "uid");
  std::string source = Str(Obj(spec(), "source"), "volumeHandle");
  if (uid.empty()) return Failed("SnapshotCreationFailed", "cannot take a snapshot without a VolumeSnapshot uid");
  std::string class_name = Str(spec(), "volumeSnapshotClassName");
  if (class_name.empty())
    return Failed("SnapshotCreationFailed", "cannot take a snapshot without a VolumeSnapshotClass");
  json cls;
  auto r = ctx_.client->Get(std::string(kSnapshotApi) + "/volumesnapshotclasses/" + class_name, &cls);
  if (!r.ok())
    return Failed("SnapshotCreationFailed", "reading VolumeSnapshotClass " + class_name + ": " + r.ToString());
  // nodevol snapshots take no parameters: one the driver does not know is
  // an error, not silently ignored.
  for (const auto& [k, v] : Obj(cls, "parameters").items())
    if (k.rfind(kCsiParamPrefix, 0) != 0)
      return Failed("SnapshotCreationFailed", "VolumeSnapshotClass " + class_name + " has parameter \"" + k +
                                                  "\"; nodevol snapshots take none");
  std::string node;
  Status st = SourceOf(source, &node);
  if (!st.ok() && HasAnnotation(kAnnBeingCreated)) return SettleUncertainCreate(uid, source, st);
  if (!st.ok()) return Failed("SnapshotCreationFailed", st.message());
  auto client = Client(node, &st);
  if (!client) return Failed("SnapshotCreationFailed", st.message());
  st = SetAnnotations({{kAnnBeingCreated, "yes"}, {kAnnSnapshotNode, node}});
  if (!st.ok()) return Failed("SnapshotCreationFailed", st.message());

  SnapshotHandle h{node, SnapshotNameFor(uid)};
  v1::CreateSnapshotRequest req;
  req.set_name(h.name);
  req.set_source_volume(source);
  v1::CreateSnapshotResponse resp;
  auto t0 = std::chrono::steady_clock::now();
  st = client->CreateSnapshot(req, &resp);
  if (ctx_.metrics)
    ctx_.metrics->SnapshotOperation("create", st.ok(),
                                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (!st.ok()) {
    if (!MayStillRun(st.code())) {
      Status ann = ClearBeingCreated();
      if (!ann.ok()) spdlog::warn("VolumeSnapshotContent {}: {}", name_, ann.message());
    }
    return Failed("SnapshotCreationFailed", "taking snapshot of volume " + source + " on node " + node + ": " +
                                                st.message());
  }
  st = WriteStatus(h, resp.snapshot());
  if (!st.ok()) return Failed("SnapshotCreationFailed", st.message());
  st = ClearBeingCreated();
  if (!st.ok()) return Outcome::kRetry;
  spdlog::info("VolumeSnapshotContent {}: snapshot {} of volume {} taken", name_, FormatSnapshotHandle(h), source);
  return resp.snapshot().state() == v1::VOLUME_STATE_READY ? Outcome::kDone : Outcome::kRetry;
}

Outcome ContentPass::SettleUncertainCreate(const std::string& uid, const std::string& source, const Status& why) {
  // Where the create went; a content annotated by an older provisioner
  // names no node: every node that reports pools is asked.
  std::vector<std::string> nodes;
  if (std::string n = Str(Obj(meta(), "annotations"), kAnnSnapshotNode); !n.empty()) {
    nodes.push_back(n);
  } else {
    for (const PoolSeen& p : ctx_.node_view->Pools())
      if (std::find(nodes.begin(), nodes.end(), p.node) == nodes.end()) nodes.push_back(p.node);
  }
  const std::string name = SnapshotNameFor(uid);
  std::string unreachable;
  std::vector<std::pair<std::string, v1::Snapshot>> holders;
  for (const std::string& node : nodes) {
    Status st;
    v1::GetSnapshotResponse got;
    if (auto client = Client(node, &st)) {
      v1::GetSnapshotRequest req;
      req.set_name(name);
      st = client->GetSnapshot(req, &got);
    } else if (json n; ctx_.client->Get("/api/v1/nodes/" + node, &n).code() == kube::Result::Code::kNotFound) {
      continue;  // a Node deleted for good holds nothing any more
    }
    if (st.code() == Status::Code::kNotFound) continue;
    if (!st.ok()) {
      unreachable += (unreachable.empty() ? "" : "; ") + st.message();
      continue;
    }
    holders.emplace_back(node, got.snapshot());
  }
  // More than one holder: one of them is lying (a compromised node would
  // take the restores), so none is believed.
  if (holders.size() > 1)
    return Failed("SnapshotCreationFailed", "snapshot " + name + " is reported by nodes " + holders[0].first +
                                                " and " + holders[1].first + "; it was made on one of them only");
  if (holders.size() == 1) {
    const auto& [node, snap] = holders.front();
    // The create did run: the snapshot is this content's, source gone or not.
    if (snap.source_volume() != source)
      return Failed("SnapshotCreationFailed", "snapshot " + name + " on node " + node + " is of volume " +
                                                  snap.source_volume() + ", not " + source);
    SnapshotHandle h{node, name};
    if (Status w = WriteStatus(h, snap); !w.ok()) return Failed("SnapshotCreationFailed", w.message());
    spdlog::info("VolumeSnapshotContent {}: the create that may have run did: snapshot {} of volume {}", name_,
                 FormatSnapshotHandle(h), source);
    // Half made (its nodevold stopped mid-create) and the content going:
    // DeleteSnapshot removes it on the node; waiting for it to be ready
    // would wait for a create that is never asked for again.
    if (snap.state() != v1::VOLUME_STATE_READY && !Deleting()) return Outcome::kRetry;
    if (!ClearBeingCreated().ok()) return Outcome::kRetry;
    // Dropping the annotation queues no pass: a content to go goes now.
    return ShouldDelete() ? Delete() : Outcome::kDone;
  }
  // Still uncertain while a node that may hold it does not answer.
  if (!unreachable.empty() || nodes.empty())
    return Failed("SnapshotCreationFailed",
                  why.message() + "; an earlier create may have made snapshot " + name + " and " +
                      (nodes.empty() ? "no node is known to ask" : "a node that may hold it did not answer: " +
                                                                       unreachable));
  // No node has it, and none can make it any more (the call's deadline is
  // long past, and the node bounds its waits by it): nothing to delete, so
  // the content may go (issue 69 item 5: it kept its finalizer for ever).
  if (Status st = ClearBeingCreated(); !st.ok())
    return Failed("SnapshotCreationFailed", st.message());
  if (ShouldDelete()) return Delete();
  return Failed("SnapshotCreationFailed", why.message() + "; no node holds snapshot " + name);
}

Outcome ContentPass::CheckStatic() {
  std::string handle = Str(Obj(spec(), "source"), "snapshotHandle");
  SnapshotHandle h;
  Status st = ParseSnapshotHandle(handle, &h);
  if (!st.ok()) return Failed("SnapshotContentCheckandUpdateFailed", st.message());
  v1::GetSnapshotResponse got;
  if (auto client = Client(h.node, &st)) {
    v1::GetSnapshotRequest req;
    req.set_name(h.name);
    st = client->GetSnapshot(req, &got);
  }
  if (!st.ok()) return Failed("SnapshotContentCheckandUpdateFailed", "snapshot " + handle + ": " + st.message());
  st = WriteStatus(h, got.snapshot());
  if (!st.ok()) return Failed("SnapshotContentCheckandUpdateFailed", st.message());
  return got.snapshot().state() == v1::VOLUME_STATE_READY ? Outcome::kDone : Outcome::kRetry;
}

Outcome ContentPass::Run() {
  if (!ctx_.options.Serves(Str(spec(), "driver"))) return Outcome::kDone;
  if (ShouldDelete()) return Delete();
  if (Deleting() && !HasAnnotation(kAnnBeingCreated))
    return Outcome::kDone;  // the snapshot-controller decides first
  // Being deleted: never a new create, only the one that may have run
  // settled (found where it went, or known never made), then the content
  // goes. A pass that took a deleting content for one to create, from a
  // cache still showing its own being-created, made the snapshot again; a
  // create that kept failing (a thick pool) then reached the queue's
  // failure limit and the content kept its finalizer for ever.
  if (Deleting())
    return SettleUncertainCreate(Str(Obj(spec(), "volumeSnapshotRef"), "uid"), Str(Obj(spec(), "source"), "volumeHandle"),
                                 Status::Aborted("VolumeSnapshotContent " + name_ + " is being deleted"));
  const json st = status();
  bool ready = Bool(st, "readyToUse");
  if (ready && !Str(st, "snapshotHandle").empty()) {
    if (!HasAnnotation(kAnnBeingCreated)) return Outcome::kDone;
    return ClearBeingCreated().ok() ? Outcome::kDone : Outcome::kRetry;
  }
  if (Obj(spec(), "source").contains("snapshotHandle")) return CheckStatic();
  if (Obj(spec(), "source").contains("volumeHandle")) return Create();
  return Failed("SnapshotContentCheckandUpdateFailed", "spec.source names neither volumeHandle nor snapshotHandle");
}

}  // namespace

Workers::Outcome SyncContent(ControllerContext& ctx, kube::Informer* contents, const std::string& name) {
  auto content = contents->Get(name);
  if (!content) return Outcome::kDone;
  ContentPass pass(ctx, *content);
  return pass.Run();
}

}  // namespace nodevol::provisioner
