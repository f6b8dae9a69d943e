#include "reply.h"

#include <nlohmann/json.hpp>

namespace nodevol::flex {

Reply Reply::Init() {
  Reply r = Success();
  r.with_capabilities = true;
  return r;
}

std::string Reply::ToJson() const {
  nlohmann::ordered_json j;
  switch (kind) {
    case Kind::kSuccess: j["status"] = "Success"; break;
    case Kind::kFailure: j["status"] = "Failure"; break;
    case Kind::kNotSupported: j["status"] = "Not supported"; break;
  }
  if (!message.empty()) j["message"] = message;
  if (with_capabilities) {
    // Every key spelled out: left-out keys default to true in kubelet.
    // fsGroup is false because nodevold applies the pod's fsGroup itself at
    // Publish (only when the volume root's group differs), instead of
    // kubelet's recursive chown of the whole volume on every mount.
    j["capabilities"] = {
        {"attach", false},          {"selinuxRelabel", true}, {"supportsMetrics", true},
        {"fsGroup", false},         {"requiresFSResize", true},
    };
  }
  // Invalid UTF-8 (say, from a path) must not make dump() throw.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace nodevol::flex
