#include "extender/args.h"

#include <algorithm>
#include <unordered_set>

#include <nlohmann/json.hpp>

namespace nodevol::provisioner {

using nlohmann::json;

namespace {

// Deepest nesting of [ and { outside strings; stops counting past `limit`.
int Depth(std::string_view s, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

const json* Field(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

std::string StringField(const json& obj, const char* key) {
  const json* v = Field(obj, key);
  return v && v->is_string() ? v->get<std::string>() : "";
}

Status Invalid(const std::string& what) { return Status::InvalidArgument("extender request: " + what); }

}  // namespace

Status DecodeExtenderArgs(std::string_view body, ExtenderArgs* out) {
  *out = {};
  if (Depth(body, kMaxJsonDepth) > kMaxJsonDepth)
    return Invalid("nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  json doc = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Invalid("not JSON");
  if (!doc.is_object()) return Invalid("not a JSON object");

  const json* pod = Field(doc, "Pod");
  if (!pod || !pod->is_object()) return Invalid("no Pod object");
  const json* meta = Field(*pod, "metadata");
  if (!meta || !meta->is_object()) return Invalid("Pod has no metadata");
  out->pod_name = StringField(*meta, "name");
  out->pod_namespace = StringField(*meta, "namespace");
  out->pod_uid = StringField(*meta, "uid");
  if (out->pod_name.empty() || out->pod_namespace.empty()) return Invalid("Pod has no name or namespace");

  const json* spec = Field(*pod, "spec");
  const json* volumes = spec ? Field(*spec, "volumes") : nullptr;
  if (volumes && !volumes->is_null()) {
    if (!volumes->is_array()) return Invalid("Pod spec.volumes is not a list");
    std::unordered_set<std::string> seen;  // 40,000 names took 13 s with a linear search each
    for (const auto& v : *volumes) {
      std::string claim;
      if (const json* pvc = Field(v, "persistentVolumeClaim")) {
        claim = StringField(*pvc, "claimName");
        if (claim.empty()) return Invalid("a persistentVolumeClaim volume has no claimName");
      } else if (Field(v, "ephemeral")) {
        std::string name = StringField(v, "name");
        if (name.empty()) return Invalid("an ephemeral volume has no name");
        claim = out->pod_name + "-" + name;
      } else {
        continue;
      }
      if (seen.insert(claim).second) out->claim_names.push_back(claim);
    }
  }

  if (const json* names = Field(doc, "NodeNames"); names && !names->is_null()) {
    if (!names->is_array()) return Invalid("NodeNames is not a list");
    out->node_names_given = true;
    for (const auto& n : *names) {
      if (!n.is_string() || n.get_ref<const std::string&>().empty()) return Invalid("NodeNames holds a non-name");
      out->node_names.push_back(n.get<std::string>());
    }
  } else if (const json* nodes = Field(doc, "Nodes"); nodes && !nodes->is_null()) {
    const json* items = Field(*nodes, "items");
    if (!items || !items->is_array()) return Invalid("Nodes has no items list");
    for (const auto& n : *items) {
      const json* m = Field(n, "metadata");
      std::string name = m ? StringField(*m, "name") : "";
      if (name.empty()) return Invalid("a Node in Nodes.items has no name");
      out->node_names.push_back(name);
    }
  }
  if (out->node_names.size() > kMaxExtenderNodes) return Invalid("more than " + std::to_string(kMaxExtenderNodes) + " nodes");
  return Status::Ok();
}

}  // namespace nodevol::provisioner
