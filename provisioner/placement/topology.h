// A StorageClass's allowedTopologies against a node's labels: the node is
// allowed when any term matches, a term matching when every expression's key
// has one of its values (the API allows only operator In here). No terms:
// every node is allowed.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace nodevol::provisioner {

bool NodeAllowedByTopologies(const std::map<std::string, std::string>& node_labels,
                             const nlohmann::json& allowed_topologies);

}  // namespace nodevol::provisioner
