// HttpApi: the five object calls of Api as HTTP requests, written once for
// both clients (Client, the provisioner's pooled one; SimpleClient,
// nodevold's one connection a call): the method, the content type, the JSON
// body, and Delete's preconditions (a uid is required: never delete a
// namesake). A client supplies Do, one request whose 2xx answer's JSON goes
// to *out when out is not null.
#pragma once

#include <string>
#include <string_view>

#include "kube/api.h"

namespace nodevol::kube {

class HttpApi : public Api {
 public:
  Result Get(const std::string& path, nlohmann::json* out) override;
  // POST to a collection.
  Result Create(const std::string& collection_path, const nlohmann::json& object,
                nlohmann::json* out = nullptr) override;
  // PUT; carries the object's metadata.resourceVersion, so a stale one is Conflict.
  Result Update(const std::string& path, const nlohmann::json& object, nlohmann::json* out = nullptr) override;
  // PATCH application/merge-patch+json (null deletes a key). Put
  // metadata.resourceVersion in the patch to make it conditional.
  Result MergePatch(const std::string& path, const nlohmann::json& patch, nlohmann::json* out = nullptr) override;
  // DELETE with preconditions {uid, resourceVersion}; a mismatch is Conflict.
  Result Delete(const std::string& path, const DeletePreconditions& preconditions,
                nlohmann::json* out = nullptr) override;

 protected:
  virtual Result Do(const char* method, const std::string& path, std::string_view content_type,
                    const std::string* body, nlohmann::json* out) = 0;
};

}  // namespace nodevol::kube
