// KubeLeaseStore: the LeaseStore of a coordination.k8s.io/v1 Lease in the
// apiserver (GET / POST / PUT .../namespaces/<ns>/leases/<name>).
//
// Like client-go's LeaseLock it updates the object it read or wrote last,
// so labels, annotations and spec fields it does not manage survive; the
// resourceVersion comes from the caller. Errors map to the LeaseStore codes
// by the apiserver's Status.reason (NotFound, AlreadyExists, Conflict ->
// FAILED_PRECONDITION); everything else is UNAVAILABLE with the server's
// message. Each request ends within the Client's timeout and within the
// limit SetCallTimeout last gave (kube/call_timeout.h). Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "kube/client.h"
#include "leader/lease_store.h"

namespace nodevol::leader {

class KubeLeaseStore : public LeaseStore {
 public:
  // `client` must outlive the store.
  KubeLeaseStore(kube::Client* client, std::string namespace_name, std::string name);

  Status Get(LeaseRecord* record, std::string* resource_version) override;
  Status Create(const LeaseRecord& record, std::string* resource_version) override;
  Status Update(const LeaseRecord& record, const std::string& resource_version,
                std::string* new_resource_version) override;
  void SetCallTimeout(Clock::Duration limit) override {
    limit_ms_ = std::chrono::duration_cast<std::chrono::milliseconds>(limit).count();
  }
  std::string Describe() const override { return ns_ + "/" + name_; }

 private:
  Status FromResult(const kube::Result& result, std::string_view verb) const;
  // Takes the resourceVersion of a returned Lease and remembers the object.
  Status Accept(const nlohmann::json& lease, std::string* resource_version);

  kube::Client* const client_;
  const std::string ns_;
  const std::string name_;
  const std::string path_;
  std::mutex mu_;
  nlohmann::json last_;  // the Lease as last read or written
  std::atomic<long long> limit_ms_{60000};
};

}  // namespace nodevol::leader
