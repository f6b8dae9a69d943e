#include "controller/provision.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <thread>

#include "base/size.h"
#include "controller/claim.h"
#include "controller/data_source.h"
#include "controller/pod_claims.h"
#include "controller/pv.h"
#include "controller/seed_attempts.h"
#include "kube/fields.h"
#include "placement/topology.h"
#include "storageclass/class_params.h"

namespace nodevol::provisioner {

using kube::StringMap;
using kube::Strings;

namespace {

using Outcome = Workers::Outcome;
using nlohmann::json;

// Claim parameters (mountd/backend/claim_params.h) recorded with the volume.
// Claim labels and annotations only when the class's path pattern uses them:
// they may change, and a retried CreateVolume must send what the first did.
void AddClaimParams(const ClaimView& c, const std::string& class_name, const std::string& reclaim,
                    const std::string& provisioner, std::map<std::string, std::string>* params) {
  (*params)["nodevol.io/pvc-namespace"] = c.ns;
  (*params)["nodevol.io/pvc-name"] = c.name;
  (*params)["nodevol.io/pv-name"] = c.PvName();
  (*params)["nodevol.io/storage-class"] = class_name;
  (*params)["nodevol.io/reclaim-policy"] = reclaim;
  (*params)["nodevol.io/provisioner"] = provisioner;
  std::string pattern;
  if (auto it = params->find("pathPattern"); it != params->end()) pattern = it->second;
  if (auto it = params->find("subDir"); it != params->end()) pattern = it->second;
  for (const auto& [k, v] : c.annotations)
    if (pattern.find(".PVC.annotations." + k + "}") != std::string::npos)
      (*params)["nodevol.io/pvc-annotation." + k] = v;
  for (const auto& [k, v] : c.labels)
    if (pattern.find(".PVC.labels." + k + "}") != std::string::npos) (*params)["nodevol.io/pvc-label." + k] = v;
}

std::string CodeName(Status::Code c) {
  switch (c) {
    case Status::Code::kResourceExhausted: return "no room";
    case Status::Code::kUnavailable: return "unreachable";
    case Status::Code::kFailedPrecondition: return "not possible";
    default: return "error";
  }
}

class Pass {
 public:
  Pass(ControllerContext& ctx, const ClaimView& claim) : ctx_(ctx), claim_(claim) {}

  Outcome Run(const std::string& key);

 private:
  Outcome Fail(const std::string& message, Outcome outcome) {
    Event("Warning", "ProvisioningFailed", message);
    CountFailed();
    return outcome;
  }
  // The reference library's updateProvisionStats: every attempt that ends
  // in ProvisioningFailed or ProvisioningSucceeded, labelled with the
  // claim's class and its data source's kind.
  void CountFailed() {
    if (ctx_.metrics) ctx_.metrics->ProvisionFailed(claim_.class_name, claim_.data_source.kind);
  }
  void CountSucceeded() {
    if (!ctx_.metrics) return;
    ctx_.metrics->ProvisionSucceeded(claim_.class_name, claim_.data_source.kind,
                                     std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  }
  // Records an event on the claim; its time counts as step "events".
  void Event(const std::string& type, const std::string& reason, const std::string& message) {
    auto t = std::chrono::steady_clock::now();
    ctx_.events->Record(claim_.Ref(), type, reason, message);
    event_seconds_ += Since(t);
  }
  static double Since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }
  // One step's time for nodevol_provisioner_provision_step_seconds.
  void Took(std::string_view step, double seconds) {
    if (ctx_.metrics) ctx_.metrics->ProvisionStep(step, seconds);
  }
  // WaitForFirstConsumer: give the scheduler the choice back.
  Outcome Reschedule(const std::string& why);
  // No room or no reachable node: retried when capacity changes.
  Outcome WaitForRoom(const std::string& message) {
    if (ctx_.waiting) ctx_.waiting->Add(claim_.uid);
    return Fail(message, Outcome::kRetry);
  }
  // Where an earlier create may have left the volume: "" when nowhere (or
  // the volume is gone there), the node to create on again when it is
  // there; an error (retry) when that node cannot tell.
  Status PriorAttempt(bool wffc, std::string* node);
  // Remembers that CreateVolume goes to `node`; writes it on the claim
  // only when on_claim (an uncertain outcome) or the claim names another
  // node (see the definition).
  Status RecordAttempt(const std::string& node, bool on_claim);
  // The create on `node` may or may not have made the volume: say so on
  // the claim (best effort; logged when it fails).
  void RecordUncertain(const std::string& node) {
    Status st = RecordAttempt(node, true);
    if (!st.ok()) spdlog::warn("claim {}: {}", claim_.Key(), st.message());
  }
  // kOk: saved, or it already exists for this claim on `node`.
  // kAlreadyExists: a PV of the name exists for another node (our volume
  // on `node` is a duplicate). Anything else: not saved, or unknown.
  Status SavePv(const json& pv, const std::string& node, const std::string& pool, const std::string& backend);
  // Whether the existing PV `pv` is the one this pass would save.
  bool SamePv(const json& pv, const std::string& node, const std::string& pool, const std::string& backend) const;
  Status DeleteOn(nodes::NodeClient* client);
  // Undoes this pass's create promise on `node` before or after a failed
  // create. A WaitForFirstConsumer claim still has its selected node and
  // will be made there (a later pass, or a reschedule that removes it), so
  // its bytes stay promised there as TrackClaim holds them: dropped, the
  // extender promised them to the next pods of a burst, and a claim waiting
  // its turn for a busy node then found the node full (a reschedule).
  void Unreserve(const std::string& node, const std::string& pool) {
    std::lock_guard<std::mutex> lock(ctx_.ledger->decide_mu());
    ctx_.ledger->Settle(claim_.uid, false);
    if (!claim_.selected_node.empty() && node == claim_.selected_node)
      ctx_.ledger->Promise(claim_.uid, node, pool, claim_.request_bytes, CapacityLedger::Kind::kSelected,
                           CapacityLedger::Clock::now() + kSelectedFor);
  }
  // Place() for this claim, and (WaitForFirstConsumer) room on the chosen
  // node for its pod's other claims too, per pool; their own promises are
  // not counted against them. Under the ledger's decide_mu.
  Status PlaceWithSiblings(const PlacementRequest& req, const std::string& pool,
                           const std::vector<SiblingClaim>& siblings, std::string* node);

  ControllerContext& ctx_;
  const ClaimView& claim_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  double event_seconds_ = 0;  // in Event() so far
};

Outcome Pass::Reschedule(const std::string& why) {
  Event("Warning", "ProvisioningFailed",
                      "node " + claim_.selected_node + " cannot take the volume (" + why +
                          "); asking the scheduler to pick another node");
  CountFailed();
  json patch = {{"metadata",
                 {{"resourceVersion", claim_.resource_version}, {"annotations", {{kAnnSelectedNode, nullptr}}}}}};
  auto r = ctx_.client->MergePatch("/api/v1/namespaces/" + claim_.ns + "/persistentvolumeclaims/" + claim_.name,
                                   patch);
  if (r.ok() || r.code() == kube::Result::Code::kNotFound) return Outcome::kDone;
  // Conflict: the claim changed (maybe a newer choice); its update requeues it.
  if (r.code() == kube::Result::Code::kConflict) return Outcome::kDone;
  spdlog::warn("claim {}: removing {} failed: {}", claim_.Key(), kAnnSelectedNode, r.ToString());
  return Outcome::kRetry;
}

bool Pass::SamePv(const json& pv, const std::string& node, const std::string& pool, const std::string& backend) const {
  auto ann = pv["metadata"].value("annotations", json::object());
  if (pv["spec"].value("claimRef", json::object()).value("uid", "") != claim_.uid) return false;
  if (ann.value(kAnnNode, "") == node) return true;
  // An NFS volume is the same directory whichever node serving the pool made it.
  return backend == "nfs" && ann.value(kAnnBackend, "") == "nfs" && ann.value(kAnnPool, "") == pool;
}

Status Pass::SavePv(const json& pv, const std::string& node, const std::string& pool, const std::string& backend) {
  const std::string path = "/api/v1/persistentvolumes/" + claim_.PvName();
  kube::Result r;
  for (int i = 0; i < ctx_.options.pv_save_tries; ++i) {
    if (i && ctx_.stop && !ctx_.stop->WaitFor(ctx_.options.pv_save_pause)) {
      return Status::Aborted("stopping before PV " + claim_.PvName() + " was saved");
    }
    if (i && !ctx_.stop) std::this_thread::sleep_for(ctx_.options.pv_save_pause);
    r = ctx_.client->Create("/api/v1/persistentvolumes", pv);
    if (r.ok()) return Status::Ok();
    if (r.code() == kube::Result::Code::kAlreadyExists) break;
    spdlog::warn("claim {}: saving PV {} failed (try {}/{}): {}", claim_.Key(), claim_.PvName(), i + 1,
                 ctx_.options.pv_save_tries, r.ToString());
    if (r.code() == kube::Result::Code::kInvalid || r.code() == kube::Result::Code::kForbidden) break;
  }
  // AlreadyExists, or an outcome we cannot be sure of (a POST that timed
  // out client-side may have been committed): read the PV back, live.
  json existing;
  kube::Result got = ctx_.client->Get(path, &existing);
  if (got.ok()) {
    if (SamePv(existing, node, pool, backend)) return Status::Ok();
    return Status::AlreadyExists("PV " + claim_.PvName() + " exists for node " +
                                 existing["metadata"].value("annotations", json::object()).value(kAnnNode, "?"));
  }
  if (got.code() == kube::Result::Code::kNotFound)
    return Status::NotFound("PV " + claim_.PvName() + " not saved: " + r.ToString());
  return Status::Unavailable("PV " + claim_.PvName() + " may or may not be saved (" + r.ToString() +
                             "; reading it back: " + got.ToString() + ")");
}

Status Pass::PlaceWithSiblings(const PlacementRequest& req, const std::string& pool,
                               const std::vector<SiblingClaim>& siblings, std::string* node) {
  std::set<std::string> except = {claim_.uid};
  std::map<std::string, uint64_t> need;  // pool -> bytes, this claim's pool included
  need[pool] = SaturatingAdd(need[pool], req.bytes);
  for (const auto& s : siblings) {
    except.insert(s.claim.uid);
    need[s.pool] = SaturatingAdd(need[s.pool], s.claim.request_bytes);
  }
  auto rooms = ctx_.ledger->Rooms(except);
  PlacementRequest all = req;
  all.bytes = need[pool];
  Status st;
  // A claim free to go anywhere avoids nodes busy with other creates
  // (NodeLoad), unless only they have room.
  if (ctx_.load && !req.restrict_nodes && siblings.empty()) {
    auto busy = ctx_.load->Busy();
    std::vector<PoolRoom> idle;
    for (const auto& r : rooms)
      if (busy.count(r.seen.node) == 0) idle.push_back(r);
    if (!busy.empty() && Place(idle, all, ctx_.options.policy, node).ok()) return Status::Ok();
  }
  st = Place(rooms, all, ctx_.options.policy, node);
  if (!st.ok() || siblings.empty()) {
    if (!st.ok() && need[pool] > req.bytes)
      return Status(st.code(), st.message() + " (" + FormatSize(need[pool]) + " for this claim and " +
                                   std::to_string(siblings.size()) + " other claim(s) of its pod)");
    return st;
  }
  for (const auto& [other_pool, bytes] : need) {
    if (other_pool == pool) continue;
    PlacementRequest r;
    r.pool = other_pool;
    r.bytes = bytes;
    r.allowed_nodes = {*node};
    r.restrict_nodes = true;
    std::string same;
    st = Place(rooms, r, ctx_.options.policy, &same);
    if (!st.ok()) return Status(st.code(), "the pod's claims in pool " + other_pool + " do not fit: " + st.message());
  }
  return Status::Ok();
}

Status Pass::DeleteOn(nodes::NodeClient* client) {
  v1::DeleteVolumeRequest del;
  del.set_name(claim_.PvName());
  v1::DeleteVolumeResponse deleted;
  return client->DeleteVolume(del, &deleted);
}

Status Pass::PriorAttempt(bool wffc, std::string* node) {
  node->clear();
  std::string prior = ctx_.attempts ? ctx_.attempts->Get(claim_.uid) : "";
  if (prior.empty()) {
    auto it = claim_.annotations.find(kAnnProvisioningNode);
    if (it != claim_.annotations.end()) prior = it->second;
  }
  if (prior.empty()) return Status::Ok();
  auto client = ctx_.node_view->Client(prior);
  if (!client)
    return Status::Unavailable("an earlier attempt may have created volume " + claim_.PvName() + " on node " + prior +
                               ", which is not known now; waiting for it");
  v1::GetVolumeRequest get;
  get.set_name(claim_.PvName());
  v1::GetVolumeResponse got;
  Status st = client->GetVolume(get, &got);
  if (st.code() == Status::Code::kNotFound) return Status::Ok();
  if (!st.ok())
    return Status::Unavailable("an earlier attempt may have created volume " + claim_.PvName() + " on node " + prior +
                               ", which cannot tell now: " + st.message());
  if (wffc && prior != claim_.selected_node) {
    // The scheduler has chosen another node since: the volume made for the
    // old choice is of no use (no PV names it); remove it first.
    st = DeleteOn(client.get());
    if (!st.ok())
      return Status::Unavailable("volume " + claim_.PvName() + " made on node " + prior +
                                 " (before the scheduler chose " + claim_.selected_node +
                                 ") not deleted yet: " + st.message());
    spdlog::info("claim {}: deleted {} on node {}, made before the scheduler chose {}", claim_.Key(),
                 claim_.PvName(), prior, claim_.selected_node);
    return Status::Ok();
  }
  *node = prior;
  return Status::Ok();
}

// Before CreateVolume (on_claim false) this process remembers the node,
// and a new leader would find the volume there (SeedAttempts): no apiserver
// write, unless the claim's annotation names another node (it must never
// point away from a volume). After an uncertain outcome (on_claim true)
// the node is written on the claim too, for a node the next leader cannot
// read. A failed write is logged: the memory still holds the node.
Status Pass::RecordAttempt(const std::string& node, bool on_claim) {
  if (ctx_.attempts) ctx_.attempts->Set(claim_.uid, node);
  auto it = claim_.annotations.find(kAnnProvisioningNode);
  const bool recorded = it != claim_.annotations.end();
  if (recorded && it->second == node) return Status::Ok();
  if (!recorded && !on_claim) return Status::Ok();
  json patch = {{"metadata", {{"uid", claim_.uid}, {"annotations", {{kAnnProvisioningNode, node}}}}}};
  auto r = ctx_.client->MergePatch("/api/v1/namespaces/" + claim_.ns + "/persistentvolumeclaims/" + claim_.name,
                                   patch);
  if (r.ok()) return Status::Ok();
  return Status::Unavailable("recording node " + node + " on claim " + claim_.Key() + ": " + r.ToString());
}

Outcome Pass::Run(const std::string& key) {
  Status st = claim_.error;
  if (!st.ok()) {
    // Only complain about claims handed to us.
    auto it = claim_.annotations.find(kAnnStorageProvisioner);
    if (it != claim_.annotations.end() && ctx_.options.Serves(it->second)) return Fail(st.message(), Outcome::kGiveUp);
    return Outcome::kDone;
  }
  if (!ctx_.options.Serves(claim_.provisioner) || !claim_.volume_name.empty()) return Outcome::kDone;
  auto sc = ctx_.classes->Get(claim_.class_name);
  if (!sc) return Fail("storage class " + claim_.class_name + " not found", Outcome::kRetry);
  if (sc->value("provisioner", "") != claim_.provisioner) return Outcome::kDone;
  std::string binding = sc->value("volumeBindingMode", "Immediate");
  std::string why;
  if (ShouldProvision(claim_, claim_.provisioner, binding, &why) != ClaimAction::kProvision) {
    spdlog::debug("claim {}: not provisioning: {}", key, why);
    return Outcome::kDone;
  }
  // Deterministic name: a PV from an earlier pass means the work is done.
  // The cache may lag a save of ours by a moment: Attempts remembers those.
  // Nothing asks the apiserver here (the reference library does not
  // either): a PV saved by another replica that the cache has not shown
  // yet costs an idempotent pass on the node it names (PriorAttempt, the
  // create answering "exists", SavePv finding the same PV).
  if (ctx_.volumes->Get(claim_.PvName()) || (ctx_.attempts && ctx_.attempts->WasSaved(claim_.uid)))
    return Outcome::kDone;

  ClassParams params;
  st = ParseClassParams(StringMap(sc->value("parameters", json::object())), Strings(sc->value("mountOptions", json())),
                        &params);
  if (!st.ok()) return Fail(st.message(), Outcome::kGiveUp);
  // Raw block: CSI PVs of lvm pools (nodevold refuses other pools with
  // INVALID_ARGUMENT, one event); FlexVolume publishes filesystems only.
  const bool block = claim_.volume_mode == "Block";
  if (block && !params.IsCsi())
    return Fail("volumeMode Block needs a class with volumeSource: csi (FlexVolume publishes filesystems only)",
                Outcome::kGiveUp);
  if (block && (params.IsNfs() || params.backend == "dir"))
    return Fail("volumeMode Block needs an lvm pool; class " + claim_.class_name + " is backend " + params.backend,
                Outcome::kGiveUp);
  if (block && !params.fs_type.empty())
    return Fail("volumeMode Block has no filesystem, but class " + claim_.class_name + " asks for fsType " +
                    params.fs_type + "; use a class without fsType",
                Outcome::kGiveUp);
  for (const auto& m : claim_.access_modes)
    if (m != "ReadWriteOnce" && m != "ReadWriteOncePod" && m != "ReadOnlyMany" && !(params.IsNfs() && m == "ReadWriteMany"))
      return Fail("access mode " + m + " is not supported by " + (params.backend.empty() ? "this" : params.backend) +
                      " volumes (node-local volumes are ReadWriteOnce, ReadWriteOncePod or ReadOnlyMany; NFS also "
                      "ReadWriteMany)",
                  Outcome::kGiveUp);
  for (const auto& m : claim_.access_modes)
    if (block && m == "ReadOnlyMany")
      return Fail("a raw block volume cannot be published read-only (the device stays writable); use "
                  "ReadWriteOnce or ReadWriteOncePod",
                  Outcome::kGiveUp);
  std::string reclaim = sc->value("reclaimPolicy", "Delete");
  // A snapshot to restore or a claim to clone: made on its node, or not at all.
  VolumeSource source;
  st = ResolveDataSource(ctx_, claim_, &source);
  if (st.code() == Status::Code::kUnimplemented) {
    spdlog::debug("claim {}: not provisioning: {}", key, st.message());
    return Outcome::kDone;
  }
  if (!st.ok()) return Fail(st.message(), st.code() == Status::Code::kInvalidArgument ? Outcome::kGiveUp : Outcome::kRetry);
  const bool from_source = source.kind != VolumeSource::Kind::kNone;
  const std::string source_where = from_source ? source.description + " is on node " + source.node : "";


  // Place and reserve under one lock, so racing claims see each other.
  PlacementRequest req;
  req.pool = params.pool;
  req.backend = params.backend;
  req.bytes = claim_.request_bytes;
  bool wffc = binding == "WaitForFirstConsumer";
  if (from_source) {
    if (wffc && claim_.selected_node != source.node)
      return Reschedule(source_where + "; a volume made from it can only be made there");
    req.allowed_nodes = {source.node};
    req.restrict_nodes = true;
  } else if (wffc) {
    req.allowed_nodes = {claim_.selected_node};
    req.restrict_nodes = true;
  } else if (sc->contains("allowedTopologies")) {
    req.restrict_nodes = true;
    for (const auto& node : ctx_.nodes->List())
      if (NodeAllowedByTopologies(node->labels, (*sc)["allowedTopologies"])) req.allowed_nodes.insert(node->name);
  }
  // A claim stays with the node an earlier create went to until that node
  // says the volume does not exist: that create may have succeeded (a
  // timeout, a restart of nodevold, a lost PV save) and a second
  // placement would make a second volume.
  std::string node;
  SeedAttempts(ctx_);
  st = PriorAttempt(wffc, &node);
  if (!st.ok()) return Fail(st.message(), Outcome::kRetry);
  bool reserved = false;
  if (node.empty()) {
    // A pod's other claims on the selected node: all fit there, or the
    // scheduler chooses again for all of them (never a half-made pod).
    std::vector<SiblingClaim> siblings;
    if (wffc) {
      Status ps = PodSiblings(ctx_, claim_, &siblings);
      if (!ps.ok()) spdlog::warn("claim {}: {}; deciding for this claim alone", key, ps.message());
    }
    {
      std::lock_guard<std::mutex> lock(ctx_.ledger->decide_mu());
      st = PlaceWithSiblings(req, params.pool, siblings, &node);
      if (st.ok()) {
        ctx_.ledger->Promise(claim_.uid, node, params.pool, claim_.request_bytes, CapacityLedger::Kind::kCreating);
        for (const auto& s : siblings)
          if (s.claim.selected_node == node || s.claim.selected_node.empty())
            ctx_.ledger->Promise(s.claim.uid, node, s.pool, s.claim.request_bytes, CapacityLedger::Kind::kSelected,
                                 CapacityLedger::Clock::now() + kSelectedFor);
      }
    }
    if (!st.ok()) {
      if (from_source && !wffc) return WaitForRoom(source_where + ": " + st.message());
      if (!wffc) return WaitForRoom(st.message());
      for (const auto& s : siblings)
        if (s.claim.selected_node == claim_.selected_node) {
          Status rs = RemoveSelectedNode(ctx_, s.claim);
          if (!rs.ok()) spdlog::warn("claim {}: {}", key, rs.message());
        }
      return Reschedule(st.message());
    }
    reserved = true;
  }

  auto client = ctx_.node_view->Client(node);
  if (!client) {
    if (reserved) Unreserve(node, params.pool);
    return wffc ? Reschedule("nodevold on it is not known") : WaitForRoom("node " + node + " vanished");
  }
  // A node whose nodevold serves no CSI (older, or --csi=off) could not
  // mount a spec.csi PV: the default gives it a flexVolume PV instead;
  // a class that asks for CSI, or a block claim, needs another node.
  bool csi = params.IsCsi();
  if (csi && !ctx_.node_view->ServesCsi(node)) {
    std::string why = "nodevold on node " + node + " serves no CSI driver (older than the CSI front door, or "
                      "--csi=off)";
    if (params.volume_source_given || block) {
      if (reserved) Unreserve(node, params.pool);
      std::string need = block ? "a raw block volume needs CSI" : "class " + claim_.class_name + " asks volumeSource csi";
      return wffc ? Reschedule(why + "; " + need) : Fail(why + "; " + need, Outcome::kRetry);
    }
    csi = false;
    Event("Normal", "FlexVolumeFallback", why + ": this claim gets a flexVolume PV");
  }
  // At most NodeLoad's limit of workers wait on one node; this claim waits
  // its turn outside them (no failure counted, no event: it is retried
  // every second; a selected node's bytes stay promised meanwhile).
  if (ctx_.load && !ctx_.load->TryAcquire(node)) {
    if (reserved) Unreserve(node, params.pool);
    spdlog::debug("claim {}: node {} has its share of creates in flight; later", key, node);
    return Outcome::kLater;
  }
  struct Slot {  // held until CreateVolume has answered
    NodeLoad* load;
    std::string node;
    void Done() {
      if (load) load->Release(node);
      load = nullptr;
    }
    ~Slot() { Done(); }
  } slot{ctx_.load, node};
  // Once a node is chosen and free: placement failures say why in
  // ProvisioningFailed alone, and a claim waiting for a busy node says
  // nothing every second.
  Event("Normal", "Provisioning", "External provisioner is provisioning volume for claim \"" + claim_.Key() + "\"");
  Took("decide", Since(start_) - event_seconds_);
  auto step = std::chrono::steady_clock::now();
  st = RecordAttempt(node, false);
  Took("record_attempt", Since(step));
  if (!st.ok()) {
    if (reserved) Unreserve(node, params.pool);
    spdlog::warn("claim {}: {}", key, st.message());
    return Outcome::kRetry;
  }
  v1::CreateVolumeRequest create;
  create.set_name(claim_.PvName());
  create.set_pool(params.pool);
  create.set_size_bytes(claim_.request_bytes);
  create.set_fs_type(params.fs_type);
  create.set_block(block);
  if (source.kind == VolumeSource::Kind::kSnapshot) create.set_from_snapshot(source.name);
  if (source.kind == VolumeSource::Kind::kVolume) create.set_from_volume(source.name);
  auto vparams = params.volume_params;
  std::string joined;
  for (const auto& o : params.mount_options) joined += (joined.empty() ? "" : ",") + o;
  v1::CreateVolumeResponse created;
  // The pool's kind decides where mount options go (see pv.h).
  std::string backend = params.backend;
  for (const auto& p : ctx_.node_view->Pools())
    if (p.node == node && p.pool == params.pool) backend = p.backend;
  if (backend == "nfs" && !joined.empty()) vparams["mountOptions"] = joined;
  AddClaimParams(claim_, claim_.class_name, reclaim, ctx_.options.provisioner_name, &vparams);
  for (const auto& [k, v] : vparams) (*create.mutable_parameters())[k] = v;
  step = std::chrono::steady_clock::now();
  st = client->CreateVolume(create, &created);
  slot.Done();
  Took("create_volume", Since(step));
  if (reserved && st.ok()) ctx_.ledger->Settle(claim_.uid, true, CapacityLedger::Clock::now(), created.capacity_sample());
  if (reserved && !st.ok()) Unreserve(node, params.pool);
  if (!st.ok() && st.code() != Status::Code::kInvalidArgument && st.code() != Status::Code::kResourceExhausted)
    RecordUncertain(node);
  if (!st.ok()) {
    // Only a definite "no room" may move a WaitForFirstConsumer claim: an
    // unreachable node may have made the volume (the next pass asks it).
    if (wffc && st.code() == Status::Code::kResourceExhausted) return Reschedule(st.message());
    std::string message = "creating volume " + claim_.PvName() + " on node " + node + " (" + CodeName(st.code()) +
                          "): " + st.message();
    if (!wffc && (st.code() == Status::Code::kResourceExhausted || st.code() == Status::Code::kUnavailable))
      return WaitForRoom(message);
    return Fail(message, st.code() == Status::Code::kInvalidArgument ? Outcome::kGiveUp : Outcome::kRetry);
  }

  PvPlan plan;
  plan.claim = claim_;
  plan.class_name = claim_.class_name;
  plan.reclaim_policy = reclaim;
  plan.mount_options = params.mount_options;
  plan.node = node;
  plan.pool = params.pool;
  plan.backend = created.volume().backend();
  plan.fs_type = created.volume().fs_type();
  plan.bytes = std::max<uint64_t>(created.volume().size_bytes(), claim_.request_bytes);
  plan.node_label_key = ctx_.options.node_label_key;
  plan.node_label_value = ctx_.options.node_label_value;
  plan.storage_label_key = ctx_.options.storage_label_key;
  plan.storage_label_value = ctx_.options.storage_label_value;
  plan.csi = csi;
  step = std::chrono::steady_clock::now();
  st = SavePv(BuildPersistentVolume(plan), node, plan.pool, plan.backend);
  Took("save_pv", Since(step));
  if (st.code() == Status::Code::kAlreadyExists) {
    // Another pass (another replica, before a failover) saved the PV on
    // another node: ours is a second copy nothing will ever point at.
    Status dst = DeleteOn(client.get());
    spdlog::warn("claim {}: {}; the copy on node {} {}", key, st.message(), node,
                 dst.ok() ? "is deleted" : "is left to the orphan sweep: " + dst.message());
    if (ctx_.attempts) ctx_.attempts->Saved(claim_.uid);  // another pass saved it
    return Outcome::kDone;
  }
  if (st.code() == Status::Code::kNotFound) {
    // Known not saved: nothing in the cluster points at the volume. Remove
    // it, or the orphan sweep will once it is older than its grace period.
    Status dst = DeleteOn(client.get());
    if (!dst.ok())
      Event("Warning", "ProvisioningCleanupFailed",
                          "volume " + claim_.PvName() + " on node " + node + " not deleted: " + dst.message());
    return Fail(st.message(), Outcome::kRetry);
  }
  if (!st.ok()) {
    // Stopping, or a PV that may exist: keep the volume; the next pass (on
    // this replica or the next leader) finds it on the recorded node.
    RecordUncertain(node);
    if (st.code() == Status::Code::kAborted) return Outcome::kRetry;
    return Fail(st.message(), Outcome::kRetry);
  }
  if (ctx_.attempts) ctx_.attempts->Saved(claim_.uid);
  Event("Normal", "ProvisioningSucceeded",
                      "Successfully provisioned volume " + claim_.PvName() + " (" + FormatSize(plan.bytes) + " in " +
                          plan.backend + " pool " + plan.pool + " on node " + node + ")");
  spdlog::info("claim {}: provisioned {} on node {}", key, claim_.PvName(), node);
  Took("events", event_seconds_);
  CountSucceeded();
  return Outcome::kDone;
}

}  // namespace

Workers::Outcome ProvisionClaim(ControllerContext& ctx, const std::string& key, const std::string& uid) {
  auto pvc = ctx.claims->Get(key);
  if (!pvc || (!uid.empty() && pvc->uid != uid)) return Outcome::kDone;
  InFlight::Scope busy(ctx.in_flight, pvc->PvName());
  Pass pass(ctx, *pvc);
  return pass.Run(key);
}

}  // namespace nodevol::provisioner
