// Narrow fakes for unit tests of the controller's decisions (provision.cc,
// delete.cc, orphans.cc): an in-memory apiserver behind kube::Api, nodevolds
// as real gRPC services in this process (in-process channels), informer
// caches filled from a static list. Not a test source itself (no _test.cc).
#pragma once

#include <grpcpp/grpcpp.h>

#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "controller/context.h"
#include "kube/fake_api.h"
#include "kube/informer.h"

namespace nodevol::provisioner::testing {

using nlohmann::json;

using kube::testing::FakeApi;
using kube::testing::StatusBody;

// A nodevold: volumes by name; CreateVolume can be made to create and then
// fail (an uncertain outcome), or to run a hook first.
class FakeNode final : public v1::Node::Service {
 public:
  FakeNode(std::string name, std::string backend = "lvm") : name_(std::move(name)), backend_(std::move(backend)) {
    grpc::ServerBuilder b;
    b.RegisterService(this);
    server_ = b.BuildAndStart();
  }
  ~FakeNode() override { server_->Shutdown(std::chrono::system_clock::now()); }
  std::shared_ptr<nodes::NodeClient> Client() {
    return std::make_shared<nodes::NodeClient>(name_, server_->InProcessChannel(grpc::ChannelArguments()),
                                               std::chrono::seconds(10));
  }
  const std::string& name() const { return name_; }

  // The next CreateVolume makes the volume, then answers `code`.
  void CreateThenFail(grpc::StatusCode code) {
    std::lock_guard<std::mutex> l(mu_);
    create_then_fail_ = code;
  }
  void OnCreate(std::function<void()> hook) {
    std::lock_guard<std::mutex> l(mu_);
    on_create_ = std::move(hook);
  }
  void SetDown(bool down) {
    std::lock_guard<std::mutex> l(mu_);
    down_ = down;
  }
  void AddVolume(v1::Volume v) {
    std::lock_guard<std::mutex> l(mu_);
    volumes_[v.name()] = v;
  }
  bool HasVolume(const std::string& name) {
    std::lock_guard<std::mutex> l(mu_);
    return volumes_.count(name) != 0;
  }
  v1::Volume Volume(const std::string& name) {
    std::lock_guard<std::mutex> l(mu_);
    return volumes_.count(name) ? volumes_[name] : v1::Volume();
  }
  int creates() {
    std::lock_guard<std::mutex> l(mu_);
    return creates_;
  }
  int deletes() {
    std::lock_guard<std::mutex> l(mu_);
    return deletes_;
  }
  // shared_pool of the last DeleteVolume.
  std::string last_shared_pool() {
    std::lock_guard<std::mutex> l(mu_);
    return last_shared_pool_;
  }

  grpc::Status CreateVolume(grpc::ServerContext*, const v1::CreateVolumeRequest* req,
                            v1::CreateVolumeResponse* resp) override {
    std::function<void()> hook;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (down_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake node down");
      hook = std::exchange(on_create_, nullptr);
    }
    if (hook) hook();
    std::lock_guard<std::mutex> l(mu_);
    ++creates_;
    last_create_ = *req;
    v1::Volume& v = volumes_[req->name()];
    v.set_name(req->name());
    v.set_pool(req->pool());
    v.set_backend(backend_);
    v.set_size_bytes(req->size_bytes());
    v.set_state(v1::VOLUME_STATE_READY);
    v.set_block(req->block());
    *v.mutable_parameters() = req->parameters();
    *resp->mutable_volume() = v;
    if (create_then_fail_ != grpc::StatusCode::OK) {
      auto code = std::exchange(create_then_fail_, grpc::StatusCode::OK);
      return grpc::Status(code, "fake: created, but the answer was lost");
    }
    return grpc::Status::OK;
  }
  grpc::Status DeleteVolume(grpc::ServerContext*, const v1::DeleteVolumeRequest* req,
                            v1::DeleteVolumeResponse* resp) override {
    std::lock_guard<std::mutex> l(mu_);
    if (down_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake node down");
    ++deletes_;
    last_shared_pool_ = req->shared_pool();
    resp->set_existed(volumes_.erase(req->name()) != 0);
    return grpc::Status::OK;
  }
  grpc::Status GetVolume(grpc::ServerContext*, const v1::GetVolumeRequest* req, v1::GetVolumeResponse* resp) override {
    std::lock_guard<std::mutex> l(mu_);
    if (down_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake node down");
    auto it = volumes_.find(req->name());
    if (it == volumes_.end()) return grpc::Status(grpc::StatusCode::NOT_FOUND, "volume does not exist on this node");
    *resp->mutable_volume() = it->second;
    return grpc::Status::OK;
  }
  // Snapshots: the next CreateSnapshot answers `code` (nothing made).
  void FailNextSnapshot(grpc::StatusCode code, std::string message) {
    std::lock_guard<std::mutex> l(mu_);
    snapshot_failure_ = grpc::Status(code, std::move(message));
  }
  bool HasSnapshot(const std::string& name) {
    std::lock_guard<std::mutex> l(mu_);
    return snapshots_.count(name) != 0;
  }
  void AddSnapshot(v1::Snapshot s) {
    std::lock_guard<std::mutex> l(mu_);
    snapshots_[s.name()] = s;
  }
  int snapshot_creates() {
    std::lock_guard<std::mutex> l(mu_);
    return snapshot_creates_;
  }
  const v1::CreateVolumeRequest& last_create() {
    std::lock_guard<std::mutex> l(mu_);
    return last_create_;
  }
  grpc::Status CreateSnapshot(grpc::ServerContext*, const v1::CreateSnapshotRequest* req,
                              v1::CreateSnapshotResponse* resp) override {
    std::lock_guard<std::mutex> l(mu_);
    if (down_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake node down");
    if (!snapshot_failure_.ok()) return std::exchange(snapshot_failure_, grpc::Status::OK);
    ++snapshot_creates_;
    auto vol = volumes_.find(req->source_volume());
    if (!snapshots_.count(req->name()) && vol == volumes_.end())
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "volume " + req->source_volume() + " does not exist");
    v1::Snapshot& s = snapshots_[req->name()];
    if (s.name().empty()) {
      s.set_name(req->name());
      s.set_source_volume(req->source_volume());
      s.set_pool(vol->second.pool());
      s.set_size_bytes(vol->second.size_bytes());
      s.set_state(v1::VOLUME_STATE_READY);
      s.set_created_unix(1700000000);
    }
    *resp->mutable_snapshot() = s;
    return grpc::Status::OK;
  }
  grpc::Status DeleteSnapshot(grpc::ServerContext*, const v1::DeleteSnapshotRequest* req,
                              v1::DeleteSnapshotResponse* resp) override {
    std::lock_guard<std::mutex> l(mu_);
    if (down_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake node down");
    resp->set_existed(snapshots_.erase(req->name()) != 0);
    return grpc::Status::OK;
  }
  grpc::Status GetSnapshot(grpc::ServerContext*, const v1::GetSnapshotRequest* req,
                           v1::GetSnapshotResponse* resp) override {
    std::lock_guard<std::mutex> l(mu_);
    if (down_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake node down");
    auto it = snapshots_.find(req->name());
    if (it == snapshots_.end()) return grpc::Status(grpc::StatusCode::NOT_FOUND, "snapshot does not exist");
    *resp->mutable_snapshot() = it->second;
    return grpc::Status::OK;
  }
  grpc::Status ListVolumes(grpc::ServerContext*, const v1::ListVolumesRequest*, v1::ListVolumesResponse* resp) override {
    std::lock_guard<std::mutex> l(mu_);
    if (down_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake node down");
    for (const auto& [name, v] : volumes_) *resp->add_volumes() = v;
    return grpc::Status::OK;
  }

 private:
  std::string name_, backend_;
  std::unique_ptr<grpc::Server> server_;
  std::mutex mu_;
  std::map<std::string, v1::Volume> volumes_;
  grpc::StatusCode create_then_fail_ = grpc::StatusCode::OK;
  std::function<void()> on_create_;
  bool down_ = false;
  int creates_ = 0, deletes_ = 0;
  std::string last_shared_pool_;
  std::map<std::string, v1::Snapshot> snapshots_;
  grpc::Status snapshot_failure_ = grpc::Status::OK;
  int snapshot_creates_ = 0;
  v1::CreateVolumeRequest last_create_;
};

// The pools the tests say, and clients of the fake nodes.
class FakeNodeView : public NodeView {
 public:
  void Add(FakeNode* node, const std::string& pool, uint64_t free_bytes, const std::string& backend = "lvm") {
    std::lock_guard<std::mutex> l(mu_);
    PoolSeen p;
    p.node = node->name();
    p.pool = pool;
    p.backend = backend;
    p.free_bytes = free_bytes;
    p.reachable = true;
    pools_.push_back(p);
    clients_[node->name()] = node->Client();
  }
  void SetFree(const std::string& node, uint64_t free_bytes) {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& p : pools_)
      if (p.node == node) p.free_bytes = free_bytes;
  }
  void SetReachable(const std::string& node, bool reachable) {
    std::lock_guard<std::mutex> l(mu_);
    for (auto& p : pools_)
      if (p.node == node) p.reachable = reachable;
  }
  std::vector<PoolSeen> Pools() const override {
    std::lock_guard<std::mutex> l(mu_);
    return pools_;
  }
  std::shared_ptr<nodes::NodeClient> Client(const std::string& node) const override {
    std::lock_guard<std::mutex> l(mu_);
    auto it = clients_.find(node);
    return it == clients_.end() ? nullptr : it->second;
  }
  // Every node serves CSI unless a test says otherwise.
  void SetNoCsi(const std::string& node) {
    std::lock_guard<std::mutex> l(mu_);
    no_csi_.insert(node);
  }
  bool ServesCsi(const std::string& node) const override {
    std::lock_guard<std::mutex> l(mu_);
    return !no_csi_.count(node);
  }

 private:
  mutable std::mutex mu_;
  std::set<std::string> no_csi_;
  std::vector<PoolSeen> pools_;
  std::map<std::string, std::shared_ptr<nodes::NodeClient>> clients_;
};

// An informer whose list is `items` and whose watch stays idle.
class StaticListWatcher : public kube::ListWatcher {
 public:
  explicit StaticListWatcher(std::vector<json> items) : items_(std::move(items)) {}
  kube::Result List(const std::string&, const Item& each, const std::function<void()>&, std::string* rv) override {
    for (auto item : items_) each(std::move(item));
    *rv = "1";
    return kube::Result::Ok();
  }
  kube::Result Watch(const std::string&, const Handler&, const std::atomic<bool>* cancel) override {
    while (!cancel->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return kube::Result::Cancelled();
  }

 private:
  std::vector<json> items_;
};

// A synced cache of `items`, each decoded as the controller's are.
template <typename T = json>
std::unique_ptr<kube::TypedInformer<T>> StaticCache(std::vector<json> items,
                                                    typename kube::TypedInformer<T>::Decode decode = nullptr) {
  kube::InformerOptions o;
  o.name = "static";
  auto inf = std::make_unique<kube::TypedInformer<T>>(std::make_unique<StaticListWatcher>(std::move(items)),
                                                      typename kube::TypedInformer<T>::Handlers{}, o,
                                                      std::move(decode));
  inf->Start();
  inf->WaitForSync(std::chrono::seconds(30));
  return inf;
}

inline json Claim(const std::string& uid, const std::string& size = "1Gi", const std::string& cls = "fast",
                  json extra_annotations = json::object()) {
  json ann = {{"volume.kubernetes.io/storage-provisioner", "nodevol.io"}};
  ann.update(extra_annotations);
  return {{"kind", "PersistentVolumeClaim"},
          {"apiVersion", "v1"},
          {"metadata", {{"namespace", "app"}, {"name", "data-" + uid}, {"uid", uid}, {"resourceVersion", "5"},
                        {"annotations", ann}}},
          {"spec", {{"storageClassName", cls}, {"accessModes", {"ReadWriteOnce"}},
                    {"resources", {{"requests", {{"storage", size}}}}}}}};
}

inline json Class(const std::string& name = "fast", const std::string& pool = "fast",
                  const std::string& reclaim = "Delete") {
  return {{"kind", "StorageClass"},
          {"apiVersion", "storage.k8s.io/v1"},
          {"metadata", {{"name", name}, {"resourceVersion", "3"}}},
          {"provisioner", "nodevol.io"},
          {"parameters", {{"pool", pool}}},
          {"reclaimPolicy", reclaim},
          {"volumeBindingMode", "Immediate"}};
}

inline json WaitingClass(const std::string& name = "fast") {
  json c = Class(name);
  c["volumeBindingMode"] = "WaitForFirstConsumer";
  return c;
}

// One controller world: the caches, fakes and the context over them.
struct World {
  FakeApi api;
  FakeNodeView view;
  EventRecorder events{&api, "nodevol.io"};
  CapacityLedger ledger{[this] { return view.Pools(); }, std::chrono::milliseconds(0)};
  Attempts attempts;
  DeletedVolumes deleted;
  WaitingClaims waiting;
  StopFlag stop;
  std::unique_ptr<ClaimCache> claims;
  std::unique_ptr<VolumeCache> volumes;
  std::unique_ptr<ClassCache> classes;
  std::unique_ptr<NodeCache> nodes;
  ControllerContext ctx;

  void Load(std::vector<json> claim_list, std::vector<json> pv_list = {},
            std::vector<json> class_list = {Class()}) {
    for (kube::InformerControl* i : std::initializer_list<kube::InformerControl*>{claims.get(), volumes.get(), classes.get(), nodes.get()})
      if (i) i->Stop();
    for (const auto& c : claim_list)
      api.Put("/api/v1/namespaces/app/persistentvolumeclaims/" + c["metadata"].value("name", ""), c);
    for (const auto& pv : pv_list) api.Put("/api/v1/persistentvolumes/" + pv["metadata"].value("name", ""), pv);
    claims = StaticCache<ClaimView>(std::move(claim_list), DecodeClaim);
    volumes = StaticCache<VolumeView>(std::move(pv_list), DecodeVolume);
    classes = StaticCache(std::move(class_list));
    nodes = StaticCache<KubeNode>({}, DecodeNode);
    ctx.client = &api;
    ctx.claims = claims.get();
    ctx.volumes = volumes.get();
    ctx.classes = classes.get();
    ctx.nodes = nodes.get();
    ctx.node_view = &view;
    ctx.events = &events;
    ctx.ledger = &ledger;
    ctx.attempts = &attempts;
    ctx.deleted = &deleted;
    ctx.waiting = &waiting;
    ctx.stop = &stop;
    ctx.options.pv_save_tries = 3;
    ctx.options.pv_save_pause = std::chrono::milliseconds(0);
  }
};

}  // namespace nodevol::provisioner::testing
