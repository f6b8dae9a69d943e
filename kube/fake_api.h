// FakeApi: an in-memory apiserver behind kube::Api for unit tests of the
// code that reads and writes objects (the provisioner's controller and
// signer, nodevold's enrollment): objects by path, scripted answers per
// "VERB path" taken first, in order. Only for tests.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kube/api.h"

namespace nodevol::kube::testing {

using nlohmann::json;

inline json StatusBody(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
          {"code", code},     {"reason", reason},   {"message", message}};
}

// Objects by path; scripted answers per "VERB path" taken first, in order.
class FakeApi : public kube::Api {
 public:
  struct Call {
    std::string verb, path;
    json body;
  };
  // The next `verb` on `path` gets `result` (after `commit` applies it for
  // real: a write the server made although the client saw an error).
  void Script(const std::string& verb, const std::string& path, kube::Result result, bool commit = false) {
    std::lock_guard<std::mutex> l(mu_);
    scripts_[verb + " " + path].push_back({std::move(result), commit});
  }
  void Put(const std::string& path, json obj) {
    std::lock_guard<std::mutex> l(mu_);
    objects_[path] = std::move(obj);
  }
  // Every Create first runs `f` (an apiserver that hangs: f blocks).
  void SetBlock(std::function<void()> f) {
    std::lock_guard<std::mutex> l(mu_);
    block_ = std::move(f);
  }
  bool Has(const std::string& path) {
    std::lock_guard<std::mutex> l(mu_);
    return objects_.count(path) != 0;
  }
  json Object(const std::string& path) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = objects_.find(path);
    return it == objects_.end() ? json() : it->second;
  }
  std::vector<Call> Calls() {
    std::lock_guard<std::mutex> l(mu_);
    return calls_;
  }
  // Events written (POSTs to .../events and PATCHes of them), by reason.
  std::vector<std::string> EventReasons() {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<std::string> out;
    for (const auto& c : calls_)
      if (c.verb == "POST" && c.path.find("/events") != std::string::npos) out.push_back(c.body.value("reason", ""));
    return out;
  }
  int Writes(const std::string& path_part) {
    std::lock_guard<std::mutex> l(mu_);
    int n = 0;
    for (const auto& c : calls_)
      if (c.verb != "GET" && c.path.find(path_part) != std::string::npos) ++n;
    return n;
  }

  kube::Result Get(const std::string& path, json* out) override {
    std::lock_guard<std::mutex> l(mu_);
    calls_.push_back({"GET", path, nullptr});
    if (auto s = TakeLocked("GET", path)) return *s;
    auto it = objects_.find(path);
    if (it == objects_.end()) return NotFound(path);
    if (out) *out = it->second;
    return kube::Result::Ok();
  }
  kube::Result Create(const std::string& collection, const json& obj, json* out) override {
    std::function<void()> block;
    {
      std::lock_guard<std::mutex> l(mu_);
      block = block_;
    }
    if (block) block();
    std::lock_guard<std::mutex> l(mu_);
    json made = obj;
    if (!made["metadata"].is_object()) made["metadata"] = json::object();
    // generateName: a name the server picks, as the apiserver does.
    if (made["metadata"].value("name", "").empty() && !made["metadata"].value("generateName", "").empty())
      made["metadata"]["name"] = made["metadata"]["generateName"].get<std::string>() + std::to_string(++generated_);
    std::string path = collection + "/" + made["metadata"].value("name", "");
    calls_.push_back({"POST", collection, obj});
    auto it = scripts_.find("POST " + collection);
    if (it != scripts_.end() && !it->second.empty()) {
      Scripted s = it->second.front();
      it->second.pop_front();
      if (s.commit) objects_[path] = made;
      return s.result;
    }
    if (objects_.count(path))
      return kube::Result::FromHttp(409, StatusBody(409, "AlreadyExists", path + " already exists").dump());
    objects_[path] = made;
    if (out) *out = made;
    return kube::Result::Ok(201);
  }
  kube::Result MergePatch(const std::string& path, const json& patch, json* out) override {
    std::lock_guard<std::mutex> l(mu_);
    calls_.push_back({"PATCH", path, patch});
    if (auto s = TakeLocked("PATCH", path)) return *s;
    auto it = objects_.find(path);
    // A status subresource patches its object.
    const std::string sub = "/status";
    if (it == objects_.end() && path.size() > sub.size() && path.compare(path.size() - sub.size(), sub.size(), sub) == 0)
      it = objects_.find(path.substr(0, path.size() - sub.size()));
    if (it == objects_.end()) return NotFound(path);
    it->second.merge_patch(patch);
    if (out) *out = it->second;
    return kube::Result::Ok();
  }
  // PUT of an object or of its /status or /approval subresource: the whole
  // object is replaced, 409 when its resourceVersion is not the stored one.
  kube::Result Update(const std::string& path, const json& obj, json* out) override {
    std::lock_guard<std::mutex> l(mu_);
    calls_.push_back({"PUT", path, obj});
    if (auto s = TakeLocked("PUT", path)) return *s;
    std::string base = path;
    for (const std::string sub : {"/status", "/approval"})
      if (base.size() > sub.size() && base.compare(base.size() - sub.size(), sub.size(), sub) == 0)
        base = base.substr(0, base.size() - sub.size());
    auto it = objects_.find(base);
    if (it == objects_.end()) return NotFound(path);
    const std::string have = it->second["metadata"].value("resourceVersion", "");
    const std::string want = obj.contains("metadata") ? obj["metadata"].value("resourceVersion", "") : "";
    if (!want.empty() && want != have)
      return kube::Result::FromHttp(409, StatusBody(409, "Conflict", path + ": the object has been modified").dump());
    long long version = 0;
    try {
      version = std::stoll(have);
    } catch (...) {
    }
    it->second = obj;
    it->second["metadata"]["resourceVersion"] = std::to_string(version + 1);
    if (out) *out = it->second;
    return kube::Result::Ok();
  }
  kube::Result Delete(const std::string& path, const kube::DeletePreconditions& pre, json* out) override {
    std::lock_guard<std::mutex> l(mu_);
    calls_.push_back({"DELETE", path, {{"uid", pre.uid}}});
    if (auto s = TakeLocked("DELETE", path)) return *s;
    if (!objects_.erase(path)) return NotFound(path);
    (void)out;
    return kube::Result::Ok();
  }

 private:
  struct Scripted {
    kube::Result result;
    bool commit;
  };
  static kube::Result NotFound(const std::string& path) {
    return kube::Result::FromHttp(404, StatusBody(404, "NotFound", path + " not found").dump());
  }
  std::function<void()> block_;
  std::optional<kube::Result> TakeLocked(const std::string& verb, const std::string& path) {
    auto it = scripts_.find(verb + " " + path);
    if (it == scripts_.end() || it->second.empty()) return std::nullopt;
    Scripted s = it->second.front();
    it->second.pop_front();
    return s.result;
  }

  std::mutex mu_;
  std::map<std::string, json> objects_;
  std::map<std::string, std::deque<Scripted>> scripts_;
  std::vector<Call> calls_;
  int generated_ = 0;
};

}  // namespace nodevol::kube::testing
