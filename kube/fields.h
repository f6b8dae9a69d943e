// Tolerant readers of API object fields: a missing or mistyped field reads
// as empty instead of throwing, since objects from the apiserver may omit
// anything optional.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nodevol::kube {

// j[key] if it is a string, else "".
inline std::string Str(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// j[key] if it is an object, else an empty object (never throws: API
// objects may carry null where a field is unset).
inline const nlohmann::json& Obj(const nlohmann::json& j, const char* key) {
  static const nlohmann::json empty = nlohmann::json::object();
  if (!j.is_object()) return empty;
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? *it : empty;
}

// j[key] if it is a boolean, else `otherwise`.
inline bool Bool(const nlohmann::json& j, const char* key, bool otherwise = false) {
  if (!j.is_object()) return otherwise;
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : otherwise;
}

// The string values of an object (labels, annotations, parameters).
inline std::map<std::string, std::string> StringMap(const nlohmann::json& j) {
  std::map<std::string, std::string> out;
  if (j.is_object())
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.value().is_string()) out[it.key()] = it.value().get<std::string>();
  return out;
}

// The string items of an array (mountOptions, accessModes).
inline std::vector<std::string> Strings(const nlohmann::json& j) {
  std::vector<std::string> out;
  if (j.is_array())
    for (const auto& v : j)
      if (v.is_string()) out.push_back(v.get<std::string>());
  return out;
}

// A Node's InternalIP addresses (status.addresses), in the Node's order.
inline std::vector<std::string> NodeInternalIps(const nlohmann::json& node) {
  std::vector<std::string> out;
  const auto& status = Obj(node, "status");
  auto addresses = status.find("addresses");
  if (addresses != status.end() && addresses->is_array())
    for (const auto& a : *addresses)
      if (Str(a, "type") == "InternalIP") out.push_back(Str(a, "address"));
  return out;
}

}  // namespace nodevol::kube
