// ControllerContext: what the claim and volume controllers share: the API
// client, the informers' caches, the nodes, events, the capacity ledger,
// options.
// Plain pointers: main owns everything and stops the controllers first.
#pragma once

#include <chrono>
#include <string>

#include "controller/attempts.h"
#include "controller/claim.h"
#include "controller/events.h"
#include "controller/deleted_volumes.h"
#include "controller/in_flight.h"
#include "controller/node_view.h"
#include "controller/names.h"
#include "controller/node_load.h"
#include "controller/stop_flag.h"
#include "controller/volume_view.h"
#include "controller/waiting_claims.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "metrics/metrics.h"
#include "nodes/kube_node.h"
#include "placement/placement.h"
#include "capacity/ledger.h"

namespace nodevol::provisioner {

// The informers' caches: typed views of claims, PVs and Nodes (thousands
// of each in a large cluster), whole objects for the few classes.
using ClaimCache = kube::TypedInformer<ClaimView>;
using VolumeCache = kube::TypedInformer<VolumeView>;
using NodeCache = kube::TypedInformer<KubeNode>;
using ClassCache = kube::Informer;

struct ControllerOptions {
  std::string provisioner_name = kProvisionerName;
  // Whether a class or PV naming provisioner `name` is ours.
  bool Serves(const std::string& name) const { return name == provisioner_name || name == kLegacyProvisionerName; }
  PlacementPolicy policy = PlacementPolicy::kMostFree;
  // Nodes running nodevold carry this label, and the nodes a cluster
  // admin lets serve volumes the second (NFS PVs' node affinity; an empty
  // key: none required).
  std::string node_label_key = "nodevol.io/node";
  std::string node_label_value = "true";
  std::string storage_label_key, storage_label_value;
  // Saving a PV: tries and pause (the reference library: 5, 10 s).
  int pv_save_tries = 5;
  std::chrono::milliseconds pv_save_pause{10000};
};

struct ControllerContext {
  kube::Api* client = nullptr;
  ClaimCache* claims = nullptr;
  VolumeCache* volumes = nullptr;
  ClassCache* classes = nullptr;
  NodeCache* nodes = nullptr;
  NodeView* node_view = nullptr;
  EventRecorder* events = nullptr;
  CapacityLedger* ledger = nullptr;
  ProvisionerMetrics* metrics = nullptr;  // optional
  Attempts* attempts = nullptr;
  WaitingClaims* waiting = nullptr;  // claims that failed for room or reachability
  InFlight* in_flight = nullptr;     // volumes a pass is working on (the sweep skips them)
  DeletedVolumes* deleted = nullptr;  // volumes deleted, their PVs not yet finished (null: none kept)
  NodeLoad* load = nullptr;          // CreateVolume calls in flight per node (null: no limit)
  StopFlag* stop = nullptr;
  ControllerOptions options;
};

}  // namespace nodevol::provisioner
