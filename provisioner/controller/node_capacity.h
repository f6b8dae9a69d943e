// Mirrors a node's pools' free bytes onto its Node object as annotations
// capacity.nodevol.io/<pool> = "<bytes>", so `kubectl describe node` shows
// what nodevold reports. A merge patch touching only our keys (a pool no
// longer reported loses its key); skipped when nothing changed.
#pragma once

#include <nlohmann/json.hpp>

#include "kube/client.h"
#include "nodes/kube_node.h"
#include "nodes/node_registry.h"

namespace nodevol::provisioner {

// `node`: the Node as cached (for its current annotations).
kube::Result MirrorCapacity(kube::Api* client, const KubeNode& node, const nodes::NodeState& state);

}  // namespace nodevol::provisioner
