// RegistryView: NodeView over the live NodeRegistry (nodes/node_registry.h).
#pragma once

#include "controller/node_view.h"
#include "nodes/node_registry.h"

namespace nodevol::provisioner {

class RegistryView : public NodeView {
 public:
  explicit RegistryView(const nodes::NodeRegistry* registry) : registry_(registry) {}

  std::vector<PoolSeen> Pools() const override {
    std::vector<PoolSeen> out;
    for (const auto& n : registry_->Snapshot())
      for (const auto& p : n.pools)
        out.push_back({n.name, p.name, p.backend, p.free_bytes, n.reachable, p.total_bytes, p.allocated_bytes,
                       p.size_enforced, n.figures_at, n.sample, p.shared_by});
    return out;
  }
  std::shared_ptr<nodes::NodeClient> Client(const std::string& node) const override {
    return registry_->Client(node);
  }
  bool ServesCsi(const std::string& node) const override { return !registry_->CsiDriver(node).empty(); }

 private:
  const nodes::NodeRegistry* registry_;
};

}  // namespace nodevol::provisioner
