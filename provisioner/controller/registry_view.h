// RegistryView: NodeView over the live NodeRegistry (nodes/node_registry.h).
#pragma once

#include <functional>
#include <string>

#include "controller/node_view.h"
#include "nodes/node_registry.h"

namespace nodevol::provisioner {

class RegistryView : public NodeView {
 public:
  // placeable: whether new volumes may go to a node (a cluster admin
  // marked it a storage node). Pools() (placement, the ledger, capacity
  // objects, the extender) shows only those; Client() reaches every node,
  // so the volumes an unmarked node already holds stay manageable.
  RegistryView(const nodes::NodeRegistry* registry, std::function<bool(const std::string&)> placeable)
      : registry_(registry), placeable_(std::move(placeable)) {}

  std::vector<PoolSeen> Pools() const override {
    std::vector<PoolSeen> out;
    for (const auto& n : registry_->Snapshot()) {
      if (!placeable_(n.name)) continue;
      for (const auto& p : n.pools)
        out.push_back({n.name, p.name, p.backend, p.free_bytes, n.reachable, p.total_bytes, p.allocated_bytes,
                       p.size_enforced, n.figures_at, n.sample, p.shared_by});
    }
    return out;
  }
  std::shared_ptr<nodes::NodeClient> Client(const std::string& node) const override {
    return registry_->Client(node);
  }
  bool ServesCsi(const std::string& node) const override { return !registry_->CsiDriver(node).empty(); }

 private:
  const nodes::NodeRegistry* registry_;
  std::function<bool(const std::string&)> placeable_;
};

}  // namespace nodevol::provisioner
