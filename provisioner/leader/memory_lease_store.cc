#include "leader/memory_lease_store.h"

#include <utility>

namespace nodevol::leader {

Status MemoryLeaseStore::Get(LeaseRecord* record, std::string* resource_version) {
  std::lock_guard<std::mutex> guard(mu_);
  if (unavailable_) return Status::Unavailable("lease store unavailable");
  if (!record_) return Status::NotFound("lease " + Describe() + " not found");
  *record = *record_;
  *resource_version = std::to_string(version_);
  return Status::Ok();
}

Status MemoryLeaseStore::Create(const LeaseRecord& record, std::string* resource_version) {
  std::lock_guard<std::mutex> guard(mu_);
  if (unavailable_) return Status::Unavailable("lease store unavailable");
  if (record_) return Status::AlreadyExists("lease " + Describe() + " already exists");
  record_ = record;
  *resource_version = std::to_string(++version_);
  return Status::Ok();
}

Status MemoryLeaseStore::Update(const LeaseRecord& record, const std::string& resource_version,
                                std::string* new_resource_version) {
  std::function<void()> hook;
  {
    std::lock_guard<std::mutex> guard(mu_);
    hook = std::exchange(before_update_, nullptr);
  }
  if (hook) hook();
  std::lock_guard<std::mutex> guard(mu_);
  if (unavailable_) return Status::Unavailable("lease store unavailable");
  if (!record_) return Status::NotFound("lease " + Describe() + " not found");
  if (resource_version != std::to_string(version_)) {
    return Status::FailedPrecondition("lease " + Describe() + ": conflict, resourceVersion " + resource_version +
                                      " is stale");
  }
  record_ = record;
  *new_resource_version = std::to_string(++version_);
  return Status::Ok();
}

void MemoryLeaseStore::SetCallTimeout(Clock::Duration limit) {
  std::lock_guard<std::mutex> guard(mu_);
  last_call_timeout_ = limit;
}

Clock::Duration MemoryLeaseStore::last_call_timeout() const {
  std::lock_guard<std::mutex> guard(mu_);
  return last_call_timeout_;
}

void MemoryLeaseStore::SetUnavailable(bool unavailable) {
  std::lock_guard<std::mutex> guard(mu_);
  unavailable_ = unavailable;
}

void MemoryLeaseStore::BeforeNextUpdate(std::function<void()> hook) {
  std::lock_guard<std::mutex> guard(mu_);
  before_update_ = std::move(hook);
}

std::optional<LeaseRecord> MemoryLeaseStore::record() const {
  std::lock_guard<std::mutex> guard(mu_);
  return record_;
}

void MemoryLeaseStore::Put(const LeaseRecord& record) {
  std::lock_guard<std::mutex> guard(mu_);
  record_ = record;
  ++version_;
}

}  // namespace nodevol::leader
