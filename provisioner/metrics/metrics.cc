#include "metrics/metrics.h"

#include <array>
#include <map>
#include <mutex>
#include <tuple>

#include "metrics/exposition.h"

namespace nodevol::provisioner {
namespace {

using exposition::HistogramData;

// Prometheus' DefBuckets, as the library's histograms use.
constexpr std::array<double, 11> kBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
// Steps of a pass are often well under 5 ms.
constexpr std::array<double, 14> kStepBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                0.1,    0.25,  0.5,    1,     2.5,  5,     10};

struct Outcomes {
  uint64_t succeeded = 0;
  uint64_t failed = 0;
  HistogramData duration;  // successful attempts only
};

}  // namespace

struct ProvisionerMetrics::Impl {
  mutable std::mutex mu;
  std::map<std::pair<std::string, std::string>, Outcomes, std::less<>> provisions;  // (class, source)
  std::map<std::string, Outcomes, std::less<>> deletes;                             // class
  std::map<std::string, Outcomes, std::less<>> snapshots;                           // operation
  std::map<std::string, HistogramData, std::less<>> steps;                          // step
  uint64_t reachable = 0, unreachable = 0;
  std::map<std::tuple<std::string, std::string, std::string>, uint64_t> pool_free;  // (node, pool, backend)
  bool leader = false;
  std::map<std::string, uint64_t, std::less<>> queues;
  uint64_t ca_not_after = 0, ca_retiring = 0;  // 0: no node CA

  Outcomes& Provision(std::string_view class_name, std::string_view source) {
    auto key = std::make_pair(std::string(class_name), std::string(source));
    return provisions[key];
  }
  Outcomes& Delete(std::string_view class_name) {
    auto it = deletes.find(class_name);
    if (it == deletes.end()) it = deletes.emplace(std::string(class_name), Outcomes{}).first;
    return it->second;
  }
};

ProvisionerMetrics::ProvisionerMetrics() : impl_(std::make_unique<Impl>()) {}
ProvisionerMetrics::~ProvisionerMetrics() = default;

void ProvisionerMetrics::ProvisionSucceeded(std::string_view class_name, std::string_view source, double seconds) {
  std::lock_guard lock(impl_->mu);
  Outcomes& o = impl_->Provision(class_name, source);
  ++o.succeeded;
  exposition::Observe(kBounds, seconds, &o.duration);
}

void ProvisionerMetrics::ProvisionFailed(std::string_view class_name, std::string_view source) {
  std::lock_guard lock(impl_->mu);
  ++impl_->Provision(class_name, source).failed;
}

void ProvisionerMetrics::DeleteSucceeded(std::string_view class_name, double seconds) {
  std::lock_guard lock(impl_->mu);
  Outcomes& o = impl_->Delete(class_name);
  ++o.succeeded;
  exposition::Observe(kBounds, seconds, &o.duration);
}

void ProvisionerMetrics::DeleteFailed(std::string_view class_name) {
  std::lock_guard lock(impl_->mu);
  ++impl_->Delete(class_name).failed;
}

void ProvisionerMetrics::SnapshotOperation(std::string_view operation, bool ok, double seconds) {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->snapshots.find(operation);
  if (it == impl_->snapshots.end()) it = impl_->snapshots.emplace(std::string(operation), Outcomes{}).first;
  if (!ok) {
    ++it->second.failed;
    return;
  }
  ++it->second.succeeded;
  exposition::Observe(kBounds, seconds, &it->second.duration);
}

void ProvisionerMetrics::ProvisionStep(std::string_view step, double seconds) {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->steps.find(step);
  if (it == impl_->steps.end()) it = impl_->steps.emplace(std::string(step), HistogramData{}).first;
  exposition::Observe(kStepBounds, seconds, &it->second);
}

void ProvisionerMetrics::SetNodes(const std::vector<nodes::NodeState>& nodes) {
  uint64_t reachable = 0, unreachable = 0;
  std::map<std::tuple<std::string, std::string, std::string>, uint64_t> pool_free;
  for (const auto& n : nodes) {
    ++(n.reachable ? reachable : unreachable);
    // An unreachable node's figures are its last report, possibly long
    // stale; no series beats a wrong one.
    if (!n.reachable) continue;
    for (const auto& p : n.pools) pool_free[{n.name, p.name, p.backend}] = p.free_bytes;
  }
  std::lock_guard lock(impl_->mu);
  impl_->reachable = reachable;
  impl_->unreachable = unreachable;
  impl_->pool_free = std::move(pool_free);
}

void ProvisionerMetrics::SetLeader(bool leader) {
  std::lock_guard lock(impl_->mu);
  impl_->leader = leader;
}

void ProvisionerMetrics::SetNodeCa(uint64_t not_after_unix, uint64_t retiring) {
  std::lock_guard lock(impl_->mu);
  impl_->ca_not_after = not_after_unix;
  impl_->ca_retiring = retiring;
}

void ProvisionerMetrics::SetQueueDepth(std::string_view queue, uint64_t depth) {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->queues.find(queue);
  if (it == impl_->queues.end()) it = impl_->queues.emplace(std::string(queue), 0).first;
  it->second = depth;
}

std::string ProvisionerMetrics::Render() const {
  using exposition::AppendFamily;
  using exposition::AppendHistogram;
  using exposition::AppendSample;
  std::string out;
  out.reserve(4096);
  std::lock_guard lock(impl_->mu);

  constexpr std::string_view kProvTotal = "controller_persistentvolumeclaim_provision_total";
  constexpr std::string_view kProvFailed = "controller_persistentvolumeclaim_provision_failed_total";
  constexpr std::string_view kProvDuration = "controller_persistentvolumeclaim_provision_duration_seconds";
  AppendFamily(out, kProvTotal, "counter",
               "Total number of persistent volumes provisioned successfully. Broken down by storage class name and "
               "source of the claim.");
  for (const auto& [key, o] : impl_->provisions)
    AppendSample(out, kProvTotal, {{"class", key.first}, {"source", key.second}}, o.succeeded);
  AppendFamily(out, kProvFailed, "counter",
               "Total number of persistent volume provision failed attempts. Broken down by storage class name and "
               "source of the claim.");
  for (const auto& [key, o] : impl_->provisions)
    AppendSample(out, kProvFailed, {{"class", key.first}, {"source", key.second}}, o.failed);
  AppendFamily(out, kProvDuration, "histogram",
               "Latency in seconds to provision persistent volumes. Failed provisioning attempts are ignored. Broken "
               "down by storage class name and source of the claim.");
  for (const auto& [key, o] : impl_->provisions)
    AppendHistogram(out, kProvDuration, {{"class", key.first}, {"source", key.second}}, kBounds, o.duration);

  constexpr std::string_view kDelTotal = "controller_persistentvolume_delete_total";
  constexpr std::string_view kDelFailed = "controller_persistentvolume_delete_failed_total";
  constexpr std::string_view kDelDuration = "controller_persistentvolume_delete_duration_seconds";
  AppendFamily(out, kDelTotal, "counter",
               "Total number of persistent volumes deleted successfully. Broken down by storage class name.");
  for (const auto& [cls, o] : impl_->deletes)
    AppendSample(out, kDelTotal, {{"class", cls}}, o.succeeded);
  AppendFamily(out, kDelFailed, "counter",
               "Total number of persistent volume delete failed attempts. Broken down by storage class name.");
  for (const auto& [cls, o] : impl_->deletes)
    AppendSample(out, kDelFailed, {{"class", cls}}, o.failed);
  AppendFamily(out, kDelDuration, "histogram",
               "Latency in seconds to delete persistent volumes. Failed deletion attempts are ignored. Broken down by "
               "storage class name.");
  for (const auto& [cls, o] : impl_->deletes)
    AppendHistogram(out, kDelDuration, {{"class", cls}}, kBounds, o.duration);

  constexpr std::string_view kSnapOps = "nodevol_provisioner_snapshot_operations_total";
  constexpr std::string_view kSnapDuration = "nodevol_provisioner_snapshot_operation_duration_seconds";
  AppendFamily(out, kSnapOps, "counter",
               "Snapshot calls sent to nodes for VolumeSnapshotContents, by operation (create, delete) and result.");
  for (const auto& [op, o] : impl_->snapshots) {
    AppendSample(out, kSnapOps, {{"operation", op}, {"result", "success"}}, o.succeeded);
    AppendSample(out, kSnapOps, {{"operation", op}, {"result", "failure"}}, o.failed);
  }
  AppendFamily(out, kSnapDuration, "histogram",
               "Latency in seconds of successful snapshot calls to nodes, by operation.");
  for (const auto& [op, o] : impl_->snapshots)
    AppendHistogram(out, kSnapDuration, {{"operation", op}}, kBounds, o.duration);

  constexpr std::string_view kSteps = "nodevol_provisioner_provision_step_seconds";
  AppendFamily(out, kSteps, "histogram",
               "Seconds spent in each step of provisioning passes (decide, record_attempt, create_volume, save_pv, "
               "events).");
  for (const auto& [step, h] : impl_->steps) AppendHistogram(out, kSteps, {{"step", step}}, kStepBounds, h);

  AppendFamily(out, "nodevol_provisioner_nodes", "gauge",
               "Nodes running nodevold known to the provisioner, by whether their capacity stream is up.");
  AppendSample(out, "nodevol_provisioner_nodes", {{"state", "reachable"}}, impl_->reachable);
  AppendSample(out, "nodevol_provisioner_nodes", {{"state", "unreachable"}}, impl_->unreachable);
  AppendFamily(out, "nodevol_provisioner_pool_free_bytes", "gauge",
               "Free bytes of each pool of each reachable node, as its nodevold last reported.");
  for (const auto& [key, free] : impl_->pool_free)
    AppendSample(out, "nodevol_provisioner_pool_free_bytes",
                 {{"node", std::get<0>(key)}, {"pool", std::get<1>(key)}, {"backend", std::get<2>(key)}}, free);
  AppendFamily(out, "nodevol_provisioner_leader", "gauge", "1 while this replica holds the leader lease, else 0.");
  AppendSample(out, "nodevol_provisioner_leader", {}, uint64_t{impl_->leader ? 1u : 0u});
  AppendFamily(out, "nodevol_provisioner_queue_depth", "gauge", "Keys waiting in each work queue.");
  for (const auto& [queue, depth] : impl_->queues)
    AppendSample(out, "nodevol_provisioner_queue_depth", {{"queue", queue}}, depth);
  if (impl_->ca_not_after) {
    AppendFamily(out, "nodevol_provisioner_node_ca_expiry_timestamp_seconds", "gauge",
                 "When the CA that signs the nodes' certificates expires (Unix time): rotate it well before.");
    AppendSample(out, "nodevol_provisioner_node_ca_expiry_timestamp_seconds", {}, impl_->ca_not_after);
    AppendFamily(out, "nodevol_provisioner_node_ca_retiring", "gauge",
                 "Older CAs still in the nodes' bundle while the nodes move to the new one (0 when no rotation runs).");
    AppendSample(out, "nodevol_provisioner_node_ca_retiring", {}, impl_->ca_retiring);
  }
  return out;
}

}  // namespace nodevol::provisioner
