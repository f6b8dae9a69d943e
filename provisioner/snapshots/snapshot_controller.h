// SnapshotController: the provisioner's CSI snapshotter (csi-contract.md
// §5): an informer over VolumeSnapshotContents, a queue and workers
// running SyncContent (snapshots/content.h) for those of our driver.
//
// The snapshot CRDs are the cluster's, installed with the
// snapshot-controller (docs/snapshots.md): until the API group
// snapshot.storage.k8s.io/v1 is served, this waits for it, asking once a
// minute, and the rest of the provisioner works as before.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "controller/context.h"
#include "controller/stop_flag.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "queue/work_queue.h"
#include "queue/workers.h"

namespace nodevol::provisioner {

// Whether `after` differs from `before` only by what a pass writes itself
// (status, kPassAnnotations): such an update is not queued, or
// every failed pass would queue the next at once, past the rate limiter's
// backoff. A resync (no difference) is queued: a content given up on gets
// another try then.
bool OnlyOurWrites(const nlohmann::json& before, const nlohmann::json& after);

class SnapshotController {
 public:
  struct Options {
    int workers = 2;
    int max_failures = 15;
    std::chrono::milliseconds resync{std::chrono::minutes(15)};
    std::chrono::milliseconds probe_interval{std::chrono::minutes(1)};
  };
  // `ctx` (the claim controllers' context) outlives this object.
  SnapshotController(kube::Client* client, ControllerContext* ctx, Options options);
  ~SnapshotController();  // Stop()s

  void Start();
  void Stop();
  // True once the API group is served and the contents are synced.
  bool Serving() const { return serving_; }

 private:
  void Run();

  kube::Client* client_;
  ControllerContext* ctx_;
  Options options_;
  StopFlag stop_;
  WorkQueue queue_;
  std::unique_ptr<kube::Informer> contents_;
  std::unique_ptr<Workers> workers_;
  std::thread runner_;
  std::atomic<bool> serving_{false};
};

}  // namespace nodevol::provisioner
