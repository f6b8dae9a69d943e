// ProvisionerMetrics: what nodevol-provisioner exposes to Prometheus (text
// format 0.0.4), named as sig-storage-lib-external-provisioner names them
// (subsystem "controller") so its dashboards and alerts work unchanged:
//
//   controller_persistentvolumeclaim_provision_total{class,source}          counter
//   controller_persistentvolumeclaim_provision_failed_total{class,source}   counter
//   controller_persistentvolumeclaim_provision_duration_seconds{class,source} histogram
//   controller_persistentvolume_delete_total{class}                         counter
//   controller_persistentvolume_delete_failed_total{class}                  counter
//   controller_persistentvolume_delete_duration_seconds{class}              histogram
//
// `class` is the claim's (or PV's) storage class, `source` the kind of the
// claim's data source ("" without one). As in the library,
// durations are of successful attempts only, with Prometheus' default
// buckets (5 ms .. 10 s). Plus the node registry's gauges:
//
//   nodevol_provisioner_nodes{state="reachable"|"unreachable"}
//   nodevol_provisioner_pool_free_bytes{node,pool,backend}   reachable nodes only
//   nodevol_provisioner_leader                               1 while this replica leads
//   nodevol_provisioner_queue_depth{queue}                   keys waiting ("claim", "volume")
//   nodevol_provisioner_provision_step_seconds{step}         histogram: where a claim's time goes
//   nodevol_provisioner_node_ca_expiry_timestamp_seconds     with a node CA: when it expires
//   nodevol_provisioner_node_ca_retiring                     older CAs still in the nodes' bundle
//
// Thread-safe. A class (and source) appears in all three of its families
// at its first attempt, succeeded or failed, so rate() sees the first
// increment of the other; the gauges hold what the last Set* call gave.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nodes/node_registry.h"

namespace nodevol::provisioner {

class ProvisionerMetrics {
 public:
  ProvisionerMetrics();
  ~ProvisionerMetrics();
  ProvisionerMetrics(const ProvisionerMetrics&) = delete;
  ProvisionerMetrics& operator=(const ProvisionerMetrics&) = delete;

  // One provisioning attempt of a claim that was ours to provision.
  void ProvisionSucceeded(std::string_view class_name, std::string_view source, double seconds);
  void ProvisionFailed(std::string_view class_name, std::string_view source);
  // One deletion attempt of a released PV that was ours to delete.
  void DeleteSucceeded(std::string_view class_name, double seconds);
  void DeleteFailed(std::string_view class_name);
  // One CreateSnapshot or DeleteSnapshot ("create", "delete") the snapshot
  // controller sent a node; `seconds` of successful ones feed a histogram.
  void SnapshotOperation(std::string_view operation, bool ok, double seconds = 0);
  // One step of a provisioning pass (controller/provision.cc names them:
  // "decide", "record_attempt", "create_volume", "save_pv", "events"),
  // finer buckets than the library's (0.5 ms .. 10 s).
  void ProvisionStep(std::string_view step, double seconds);

  // Replaces the node gauges with this snapshot (NodeRegistry::Snapshot()):
  // nodes gone from it vanish from the exposition.
  void SetNodes(const std::vector<nodes::NodeState>& nodes);
  void SetLeader(bool leader);
  void SetQueueDepth(std::string_view queue, uint64_t depth);
  // The node CA this replica signs with (enroll/node_ca.h).
  void SetNodeCa(uint64_t not_after_unix, uint64_t retiring);

  // The whole exposition, every family with # HELP and # TYPE.
  std::string Render() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};


}  // namespace nodevol::provisioner
