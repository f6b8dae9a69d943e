#include "extender/serving_label.h"

#include <nlohmann/json.hpp>

namespace nodevol::provisioner {

Status MarkServing(kube::Api* api, const std::string& ns, const std::string& pod, bool serving) {
  nlohmann::json value = serving ? nlohmann::json(kServingValue) : nlohmann::json(nullptr);
  nlohmann::json patch = {{"metadata", {{"labels", {{kServingLabel, value}}}}}};
  auto r = api->MergePatch("/api/v1/namespaces/" + ns + "/pods/" + pod, patch);
  if (r.ok()) return Status::Ok();
  return Status::Unavailable(std::string(serving ? "labelling" : "unlabelling") + " pod " + ns + "/" + pod + " " +
                             kServingLabel + ": " + r.ToString());
}

}  // namespace nodevol::provisioner
