// Api: the object calls the controllers make (GET, POST, PUT, merge PATCH,
// DELETE), behind a narrow interface so their decisions can be unit-tested
// against a fake (controller/testing/fake_api.h). Client is the real one;
// the contract of each call is Client's (kube/client.h).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "kube/result.h"

namespace nodevol::kube {

struct DeletePreconditions {
  std::string uid;               // required by Delete: never delete a namesake
  std::string resource_version;  // optional
};

class Api {
 public:
  virtual ~Api() = default;
  virtual Result Get(const std::string& path, nlohmann::json* out) = 0;
  virtual Result Create(const std::string& collection_path, const nlohmann::json& object,
                        nlohmann::json* out = nullptr) = 0;
  virtual Result Update(const std::string& path, const nlohmann::json& object, nlohmann::json* out = nullptr) = 0;
  virtual Result MergePatch(const std::string& path, const nlohmann::json& patch, nlohmann::json* out = nullptr) = 0;
  virtual Result Delete(const std::string& path, const DeletePreconditions& preconditions,
                        nlohmann::json* out = nullptr) = 0;
};

}  // namespace nodevol::kube
