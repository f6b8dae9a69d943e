#include "placement/topology.h"

namespace nodevol::provisioner {

bool NodeAllowedByTopologies(const std::map<std::string, std::string>& labels, const nlohmann::json& terms) {
  if (!terms.is_array() || terms.empty()) return true;
  for (const auto& term : terms) {
    const auto& exprs = term.value("matchLabelExpressions", nlohmann::json::array());
    bool all = true;
    for (const auto& e : exprs) {
      auto it = labels.find(e.value("key", ""));
      bool one = false;
      if (it != labels.end())
        for (const auto& v : e.value("values", nlohmann::json::array()))
          if (v.is_string() && v.get<std::string>() == it->second) one = true;
      if (!one) {
        all = false;
        break;
      }
    }
    if (all) return true;
  }
  return false;
}

}  // namespace nodevol::provisioner
