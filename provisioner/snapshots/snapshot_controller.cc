#include "snapshots/snapshot_controller.h"

#include <spdlog/spdlog.h>

#include "snapshots/content.h"
#include "snapshots/names.h"

namespace nodevol::provisioner {

bool OnlyOurWrites(const nlohmann::json& before, const nlohmann::json& after) {
  if (before == after) return false;  // a resync: worth another pass
  auto strip = [](nlohmann::json o) {
    o.erase("status");
    if (o.contains("metadata") && o["metadata"].is_object()) {
      auto& m = o["metadata"];
      m.erase("resourceVersion");
      m.erase("managedFields");
      if (m.contains("annotations") && m["annotations"].is_object()) {
        for (const char* ours : kPassAnnotations) m["annotations"].erase(ours);
        if (m["annotations"].empty()) m.erase("annotations");
      }
    }
    return o;
  };
  return strip(before) == strip(after);
}

SnapshotController::SnapshotController(kube::Client* client, ControllerContext* ctx, Options options)
    : client_(client), ctx_(ctx), options_(options) {
  auto enqueue = [this](const nlohmann::json& o) { queue_.Add(kube::Informer::KeyOf(o)); };
  auto on_update = [enqueue](const nlohmann::json& a, const nlohmann::json& b) {
    if (!OnlyOurWrites(a, b)) enqueue(b);
  };
  kube::InformerHandlers handlers{enqueue, on_update,
                                  [this](const nlohmann::json& o) { queue_.Forget(kube::Informer::KeyOf(o)); }};
  kube::InformerOptions io;
  io.name = "volumesnapshotcontents";
  io.resync = options_.resync;
  io.transform = kube::DropManagedFields;
  contents_ = std::make_unique<kube::Informer>(
      std::make_unique<kube::ClientListWatcher>(client_, std::string(kSnapshotApi) + "/volumesnapshotcontents"),
      handlers, io);
}

SnapshotController::~SnapshotController() { Stop(); }

void SnapshotController::Start() {
  runner_ = std::thread([this] { Run(); });
}

void SnapshotController::Run() {
  bool told = false;
  for (;;) {
    nlohmann::json group;
    auto r = client_->Get(kSnapshotApi, &group);
    if (r.ok()) break;
    if (!told) {
      spdlog::info("snapshots: {} is not served ({}); VolumeSnapshots of nodevol volumes wait for the snapshot CRDs "
                   "and snapshot-controller (docs/snapshots.md); asking again every {} s",
                   kSnapshotApi, r.ToString(),
                   std::chrono::duration_cast<std::chrono::seconds>(options_.probe_interval).count());
      told = true;
    }
    if (!stop_.WaitFor(options_.probe_interval)) return;
  }
  contents_->Start();
  while (!contents_->WaitForSync(std::chrono::seconds(1)))
    if (stop_.IsSet()) return;
  if (stop_.IsSet()) return;
  workers_ = std::make_unique<Workers>("snapshot", &queue_, options_.workers, options_.max_failures,
                                       [this](const std::string& k) { return SyncContent(*ctx_, contents_.get(), k); });
  serving_ = true;
  spdlog::info("snapshots: serving VolumeSnapshotContents of driver {}", ctx_->options.provisioner_name);
}

void SnapshotController::Stop() {
  serving_ = false;
  stop_.Set();
  queue_.ShutDown();
  if (contents_) contents_->Stop();
  if (runner_.joinable()) runner_.join();
  workers_.reset();
}

}  // namespace nodevol::provisioner
