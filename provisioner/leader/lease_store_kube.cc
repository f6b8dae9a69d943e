#include "leader/lease_store_kube.h"

#include <algorithm>
#include <utility>

#include "kube/call_timeout.h"

namespace nodevol::leader {

KubeLeaseStore::KubeLeaseStore(kube::Client* client, std::string namespace_name, std::string name)
    : client_(client),
      ns_(std::move(namespace_name)),
      name_(std::move(name)),
      path_("/apis/coordination.k8s.io/v1/namespaces/" + ns_ + "/leases/" + name_) {}

Status KubeLeaseStore::FromResult(const kube::Result& result, std::string_view verb) const {
  std::string what = std::string(verb) + " lease " + Describe() + ": " + result.ToString();
  switch (result.code()) {
    case kube::Result::Code::kOk:
      return Status::Ok();
    case kube::Result::Code::kNotFound:
      return Status::NotFound(what);
    case kube::Result::Code::kAlreadyExists:
      return Status::AlreadyExists(what);
    case kube::Result::Code::kConflict:
      return Status::FailedPrecondition(what);
    default:
      return Status::Unavailable(what);
  }
}

Status KubeLeaseStore::Accept(const nlohmann::json& lease, std::string* resource_version) {
  const nlohmann::json* rv = nullptr;
  if (lease.is_object() && lease.contains("metadata") && lease["metadata"].is_object()) {
    auto it = lease["metadata"].find("resourceVersion");
    if (it != lease["metadata"].end() && it->is_string() && !it->get<std::string>().empty()) rv = &*it;
  }
  if (rv == nullptr) return Status::Unavailable("lease " + Describe() + ": the apiserver's answer has no resourceVersion");
  *resource_version = rv->get<std::string>();
  std::lock_guard<std::mutex> guard(mu_);
  last_ = lease;
  return Status::Ok();
}

Status KubeLeaseStore::Get(LeaseRecord* record, std::string* resource_version) {
  kube::ScopedCallTimeout limit{std::chrono::milliseconds(limit_ms_.load())};
  nlohmann::json lease;
  NODEVOL_RETURN_IF_ERROR(FromResult(client_->Get(path_, &lease), "reading"));
  LeaseRecord parsed;
  NODEVOL_RETURN_IF_ERROR(
      RecordFromLeaseSpec(lease.is_object() ? lease.value("spec", nlohmann::json()) : nlohmann::json(), &parsed)
          .WithContext("lease " + Describe()));
  NODEVOL_RETURN_IF_ERROR(Accept(lease, resource_version));
  *record = parsed;
  return Status::Ok();
}

Status KubeLeaseStore::Create(const LeaseRecord& record, std::string* resource_version) {
  kube::ScopedCallTimeout limit{std::chrono::milliseconds(limit_ms_.load())};
  nlohmann::json created;
  std::string collection = "/apis/coordination.k8s.io/v1/namespaces/" + ns_ + "/leases";
  NODEVOL_RETURN_IF_ERROR(FromResult(client_->Create(collection, LeaseObject(ns_, name_, record, ""), &created), "creating"));
  return Accept(created, resource_version);
}

Status KubeLeaseStore::Update(const LeaseRecord& record, const std::string& resource_version,
                              std::string* new_resource_version) {
  kube::ScopedCallTimeout limit{std::chrono::milliseconds(limit_ms_.load())};
  nlohmann::json lease;
  {
    std::lock_guard<std::mutex> guard(mu_);
    lease = last_;
  }
  if (!lease.is_object()) lease = LeaseObject(ns_, name_, record, resource_version);
  // Our fields replace theirs; other spec fields and all metadata stay.
  nlohmann::json ours = LeaseSpecFromRecord(record);
  if (!lease.contains("spec") || !lease["spec"].is_object()) lease["spec"] = nlohmann::json::object();
  for (const char* key : {"acquireTime", "renewTime"}) lease["spec"].erase(key);
  lease["spec"].update(ours);
  lease["metadata"]["resourceVersion"] = resource_version;
  nlohmann::json updated;
  NODEVOL_RETURN_IF_ERROR(FromResult(client_->Update(path_, lease, &updated), "updating"));
  return Accept(updated, new_resource_version);
}

}  // namespace nodevol::leader
