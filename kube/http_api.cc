#include "kube/http_api.h"

#include <nlohmann/json.hpp>

namespace nodevol::kube {

Result HttpApi::Get(const std::string& path, nlohmann::json* out) { return Do("GET", path, "", nullptr, out); }

Result HttpApi::Create(const std::string& collection_path, const nlohmann::json& object, nlohmann::json* out) {
  std::string body = object.dump();
  return Do("POST", collection_path, "application/json", &body, out);
}

Result HttpApi::Update(const std::string& path, const nlohmann::json& object, nlohmann::json* out) {
  std::string body = object.dump();
  return Do("PUT", path, "application/json", &body, out);
}

Result HttpApi::MergePatch(const std::string& path, const nlohmann::json& patch, nlohmann::json* out) {
  std::string body = patch.dump();
  return Do("PATCH", path, "application/merge-patch+json", &body, out);
}

Result HttpApi::Delete(const std::string& path, const DeletePreconditions& pre, nlohmann::json* out) {
  if (pre.uid.empty()) return Result(Result::Code::kInvalid, 0, "", "DELETE " + path + ": a uid precondition is required");
  nlohmann::json options = {{"kind", "DeleteOptions"}, {"apiVersion", "v1"}, {"preconditions", {{"uid", pre.uid}}}};
  if (!pre.resource_version.empty()) options["preconditions"]["resourceVersion"] = pre.resource_version;
  std::string body = options.dump();
  return Do("DELETE", path, "application/json", &body, out);
}

}  // namespace nodevol::kube
