#include "extender/http.h"

#include <nlohmann/json.hpp>

namespace nodevol::provisioner {

using nlohmann::json;

namespace {

httpd::Response Json(int status, const json& body) {
  return {status, body.dump(-1, ' ', false, json::error_handler_t::replace), kJsonContentType};
}

// Decodes the request, or the error answer to send instead.
bool Decode(const std::string& body, const std::function<Extender*()>& current, ExtenderArgs* args, Extender** ext,
            httpd::Response* refusal) {
  Status st = DecodeExtenderArgs(body, args);
  if (st.ok() && !args->node_names_given)
    st = Status::InvalidArgument(
        "extender request without NodeNames: set nodeCacheCapable: true for this extender in the "
        "KubeSchedulerConfiguration (deploy/scheduler/)");
  if (!st.ok()) {
    *refusal = Json(400, {{"Error", st.message()}});
    return false;
  }
  *ext = current();
  if (!*ext) {
    *refusal = Json(503, {{"Error", "this nodevol-provisioner replica is not the leader (or not synced yet)"}});
    return false;
  }
  return true;
}

}  // namespace

httpd::PostHandlers ExtenderHandlers(std::function<Extender*()> current) {
  httpd::PostHandlers h;
  h["/filter"] = [current](const std::string& body) {
    ExtenderArgs args;
    Extender* ext = nullptr;
    httpd::Response refusal;
    if (!Decode(body, current, &args, &ext, &refusal)) return refusal;
    FilterAnswer a = ext->Filter(args);
    // NodeNames is always present (an empty list, not null: a missing one
    // makes kube-scheduler drop every node without a reason). An Error
    // fails the attempt; the pod is retried after a backoff.
    return Json(200, {{"NodeNames", a.nodes},
                      {"FailedNodes", a.failed},
                      {"FailedAndUnresolvableNodes", a.unresolvable},
                      {"Error", a.error}});
  };
  h["/prioritize"] = [current](const std::string& body) {
    ExtenderArgs args;
    Extender* ext = nullptr;
    httpd::Response refusal;
    if (!Decode(body, current, &args, &ext, &refusal)) return refusal;
    json list = json::array();
    for (const auto& s : ext->Prioritize(args)) list.push_back({{"Host", s.node}, {"Score", s.score}});
    return Json(200, list);
  };
  return h;
}

}  // namespace nodevol::provisioner
