#include "extender/serving_label.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace nodevol::provisioner {

Status MarkServing(kube::Api* api, const std::string& ns, const std::string& pod, bool serving) {
  nlohmann::json value = serving ? nlohmann::json(kServingValue) : nlohmann::json(nullptr);
  nlohmann::json patch = {{"metadata", {{"labels", {{kServingLabel, value}}}}}};
  auto r = api->MergePatch("/api/v1/namespaces/" + ns + "/pods/" + pod, patch);
  if (r.ok()) return Status::Ok();
  return Status::Unavailable(std::string(serving ? "labelling" : "unlabelling") + " pod " + ns + "/" + pod + " " +
                             kServingLabel + ": " + r.ToString());
}

bool MarkServingUntilDone(kube::Api* api, const std::string& ns, const std::string& pod, bool serving,
                          const std::function<bool(std::chrono::milliseconds)>& wait,
                          std::chrono::milliseconds retry, int warn_every) {
  for (int failures = 0;; ++failures) {
    Status st = MarkServing(api, ns, pod, serving);
    if (st.ok()) {
      if (failures) spdlog::info("pod {}/{} {} after {} failed tries", ns, pod,
                                 serving ? "labelled" : "unlabelled", failures);
      return true;
    }
    if (failures % warn_every == 0)
      spdlog::warn("{}; retrying every {} ms ({})", st.message(), retry.count(),
                   serving ? "the Service reaches no replica meanwhile" : "this replica is not ready meanwhile");
    if (!wait(retry)) return false;
  }
}

}  // namespace nodevol::provisioner
