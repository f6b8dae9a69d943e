// NodeView: what the controllers need from the node registry: the pools
// every node's nodevold last reported, and a client to call one node.
// An interface so the controllers do not depend on how nodes are found
// and dialled.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nodes/node_client.h"
#include "placement/placement.h"

namespace nodevol::provisioner {

class NodeView {
 public:
  virtual ~NodeView() = default;
  virtual std::vector<PoolSeen> Pools() const = 0;
  // nullptr when the node is not (or no longer) known.
  virtual std::shared_ptr<nodes::NodeClient> Client(const std::string& node) const = 0;
  // Whether the node's nodevold serves kubelet the CSI driver, so that a
  // spec.csi PV of a volume there can be mounted.
  virtual bool ServesCsi(const std::string& node) const = 0;
};

}  // namespace nodevol::provisioner
