#include "capacity/storage_capacity.h"

#include <openssl/sha.h>
#include <spdlog/spdlog.h>

#include <cstdio>

#include "kube/fields.h"
#include "kube/quantity.h"
#include "storageclass/class_params.h"

namespace nodevol::provisioner {

using nlohmann::json;

namespace {

constexpr char kHostnameLabel[] = "kubernetes.io/hostname";
constexpr char kDriverLabel[] = "csi.storage.k8s.io/drivername";
constexpr char kManagedByLabel[] = "csi.storage.k8s.io/managed-by";
constexpr char kManagedBy[] = "nodevol-provisioner";

uint64_t QuantityBytes(const json& obj, const char* field) {
  if (!obj.contains(field) || !obj[field].is_string()) return 0;
  kube::Quantity q;
  uint64_t bytes = 0;
  if (!kube::Quantity::Parse(obj[field].get<std::string>(), &q).ok() || !q.ToBytes(&bytes).ok()) return 0;
  return bytes;
}

std::string HostnameOf(const KubeNode& node) {
  std::string h = node.Hostname();
  return h.empty() ? node.name : h;
}

}  // namespace

std::string CapacityPublisher::ObjectName(const std::string& class_name, const std::string& node) {
  std::string in = std::to_string(class_name.size()) + ":" + class_name + node;  // unambiguous
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(in.data()), in.size(), digest);
  char hex[21];
  for (int i = 0; i < 10; ++i) snprintf(hex + 2 * i, 3, "%02x", digest[i]);
  return std::string("nodevol-") + hex;
}

CapacityPublisher::CapacityPublisher(kube::Api* api, const kube::Informer* classes, const kube::TypedInformer<KubeNode>* nodes,
                                     const CapacityLedger* ledger, Options options)
    : api_(api),
      classes_(classes),
      nodes_(nodes),
      ledger_(ledger),
      options_(std::move(options)),
      collection_("/apis/storage.k8s.io/v1/namespaces/" + options_.ns + "/csistoragecapacities") {}

CapacityPublisher::~CapacityPublisher() { Stop(); }

void CapacityPublisher::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable() || stopping_) return;
  started_ = std::chrono::steady_clock::now();
  poked_ = true;
  thread_ = std::thread([this] { Loop(); });
}

void CapacityPublisher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CapacityPublisher::Poke() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    poked_ = true;
  }
  cv_.notify_all();
}

void CapacityPublisher::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  int failures = 0;
  while (!stopping_) {
    // Wait for a poke, the resync or the end of a promise (room grows then
    // with no poke), then let a burst of changes settle; after failures,
    // longer (1 s doubling, at most the resync period).
    auto wake = std::chrono::steady_clock::now() + options_.resync;
    auto expiry = ledger_->NextExpiry();
    if (expiry < wake) wake = expiry;
    cv_.wait_until(lock, wake, [this] { return poked_ || stopping_; });
    if (stopping_) break;
    auto pause = options_.debounce;
    for (int i = 0; i < failures && pause < options_.resync; ++i) pause *= 2;
    cv_.wait_for(lock, std::min(pause, options_.resync), [this] { return stopping_; });
    if (stopping_) break;
    poked_ = false;
    lock.unlock();
    Status st = Sync();
    if (!st.ok()) spdlog::warn("capacity objects: {}", st.message());
    lock.lock();
    failures = st.ok() ? 0 : failures + 1;
    if (!st.ok()) poked_ = true;  // try again, after the pause above
  }
}

std::map<std::string, CapacityPublisher::Want> CapacityPublisher::Desired() const {
  std::map<std::string, Want> out;
  auto rooms = ledger_->Rooms();
  // Past the grace, a node this leader never heard from is as good as
  // unreachable: 0, as docs/scheduling.md says.
  const bool grace = std::chrono::steady_clock::now() - started_.load() < options_.unknown_grace;
  for (const auto& class_ptr : classes_->List()) {
    const json& sc = *class_ptr;
    if (sc.value("provisioner", "") != options_.driver) continue;
    ClassParams params;
    if (!ParseClassParams(kube::StringMap(sc.value("parameters", json::object())),
                          kube::Strings(sc.value("mountOptions", json())), &params)
             .ok())
      continue;  // the claims' events say why; no node can take its volumes
    const std::string class_name = sc["metadata"].value("name", "");
    for (const auto& node : nodes_->List()) {
      Want w{class_name, node->name, HostnameOf(*node), 0, grace};
      for (const auto& r : rooms) {
        if (r.seen.node != w.node) continue;
        w.unknown = false;
        if (r.seen.pool == params.pool && r.seen.reachable &&
            (params.backend.empty() || params.backend == r.seen.backend))
          w.capacity = r.room();
      }
      out[ObjectName(class_name, w.node)] = w;
    }
  }
  return out;
}

Status CapacityPublisher::List() {
  json list;
  auto r = api_->Get(collection_ + "?labelSelector=" + kManagedByLabel + "%3D" + kManagedBy + "%2C" + kDriverLabel +
                         "%3D" + options_.driver,
                     &list);
  if (!r.ok()) return Status::Unavailable("listing " + collection_ + ": " + r.ToString());
  known_.clear();
  for (const auto& o : list.value("items", json::array())) {
    Known k;
    k.uid = o["metadata"].value("uid", "");
    k.class_name = o.value("storageClassName", "");
    k.topology = o.value("nodeTopology", json::object()).value("matchLabels", json::object()).value(kHostnameLabel, "");
    k.capacity = std::min(QuantityBytes(o, "capacity"), QuantityBytes(o, "maximumVolumeSize"));
    known_[o["metadata"].value("name", "")] = k;
  }
  listed_ = true;
  listed_at_ = std::chrono::steady_clock::now();
  return Status::Ok();
}

bool CapacityPublisher::Pace() {
  auto gap = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(1.0 / std::max(0.1, options_.writes_per_second)));
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_until(lock, last_write_ + gap, [this] { return stopping_; });
  last_write_ = std::chrono::steady_clock::now();
  return !stopping_;
}

Status CapacityPublisher::Write(const std::string& verb, const std::string& name, const Want* want) {
  if (!Pace()) return Status::Aborted("stopping");
  kube::Result r;
  if (verb == "DELETE") {
    r = api_->Delete(collection_ + "/" + name, {known_[name].uid, ""});
    if (r.ok() || r.code() == kube::Result::Code::kNotFound) {
      known_.erase(name);
      return Status::Ok();
    }
  } else {
    const std::string bytes = std::to_string(want->capacity);
    json out;
    if (verb == "POST") {
      json obj = {{"apiVersion", "storage.k8s.io/v1"},
                  {"kind", "CSIStorageCapacity"},
                  {"metadata",
                   {{"name", name},
                    {"namespace", options_.ns},
                    {"labels", {{kDriverLabel, options_.driver}, {kManagedByLabel, kManagedBy}}}}},
                  {"storageClassName", want->class_name},
                  {"nodeTopology", {{"matchLabels", {{kHostnameLabel, want->hostname}}}}},
                  // Both set: kube-scheduler's scoring reads capacity, its
                  // filter maximumVolumeSize (scheduling-contract.md §1).
                  {"capacity", bytes},
                  {"maximumVolumeSize", bytes}};
      if (!options_.owner.is_null()) obj["metadata"]["ownerReferences"] = json::array({options_.owner});
      r = api_->Create(collection_, obj, &out);
    } else {
      r = api_->MergePatch(collection_ + "/" + name,
                           {{"metadata", {{"uid", known_[name].uid}}}, {"capacity", bytes}, {"maximumVolumeSize", bytes}},
                           &out);
    }
    if (r.ok()) {
      known_[name] = {out.is_object() ? out["metadata"].value("uid", known_[name].uid) : known_[name].uid,
                      want->class_name, want->hostname, want->capacity};
      return Status::Ok();
    }
  }
  listed_ = false;  // whatever went wrong, read the truth before the next pass
  return Status::Unavailable(verb + " CSIStorageCapacity " + name + ": " + r.ToString());
}

Status CapacityPublisher::Sync() {
  std::lock_guard<std::mutex> lock(sync_mu_);
  if (!listed_ || std::chrono::steady_clock::now() - listed_at_ >= options_.resync) NODEVOL_RETURN_IF_ERROR(List());
  auto want = Desired();
  Status first;
  auto note = [&](Status st) {
    if (!st.ok() && first.ok()) first = st;
    return st.code() != Status::Code::kAborted;
  };
  // New nodes first: until its object exists, the scheduler rejects a node.
  for (const auto& [name, w] : want)
    if (!known_.count(name) && !note(Write("POST", name, &w))) return first;
  for (const auto& [name, w] : want) {
    auto it = known_.find(name);
    if (it == known_.end()) continue;
    if (it->second.class_name != w.class_name || it->second.topology != w.hostname) {
      // Immutable fields: the object is made again.
      if (!note(Write("DELETE", name, nullptr)) || !note(Write("POST", name, &w))) return first;
    } else if (!w.unknown && it->second.capacity != w.capacity && !note(Write("PATCH", name, &w))) {
      return first;
    }
  }
  std::vector<std::string> stale;
  for (const auto& [name, k] : known_)
    if (!want.count(name)) stale.push_back(name);
  for (const auto& name : stale)
    if (!note(Write("DELETE", name, nullptr))) return first;
  return first;
}

Status FindDeploymentOwner(kube::Api* api, const std::string& ns, const std::string& pod, json* ref) {
  std::string path = "/api/v1/namespaces/" + ns + "/pods/" + pod;
  json obj;
  bool found = false;
  // pod -> ReplicaSet -> Deployment: at most two steps up.
  for (int depth = 0; depth < 2; ++depth) {
    auto r = api->Get(path, &obj);
    if (!r.ok()) {
      if (found) return Status::Ok();
      return Status::Unavailable("reading " + path + ": " + r.ToString());
    }
    json owner;
    for (const auto& o : obj["metadata"].value("ownerReferences", json::array()))
      if (o.value("controller", false)) owner = o;
    if (owner.is_null()) break;
    *ref = {{"apiVersion", owner.value("apiVersion", "")},
            {"kind", owner.value("kind", "")},
            {"name", owner.value("name", "")},
            {"uid", owner.value("uid", "")},
            {"controller", true}};
    found = true;
    if (owner.value("kind", "") != "ReplicaSet") break;
    path = "/apis/apps/v1/namespaces/" + ns + "/replicasets/" + owner.value("name", "");
  }
  if (!found) return Status::NotFound("pod " + ns + "/" + pod + " has no controller");
  return Status::Ok();
}

}  // namespace nodevol::provisioner
