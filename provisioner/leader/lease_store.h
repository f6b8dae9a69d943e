// LeaseStore: the Lease object leader election competes for, reduced to the
// three calls the algorithm makes. resourceVersions are opaque strings; an
// Update with a stale one must fail, which is what makes the election safe.
//
// Status codes: Get of a missing lease NOT_FOUND; Create of an existing one
// ALREADY_EXISTS; Update with a stale resourceVersion FAILED_PRECONDITION
// (the apiserver's 409 Conflict); anything else (network, 5xx) any other
// code. Calls must time out on their own, well within the renew deadline,
// and within the limit SetCallTimeout last gave: the time left until the
// renew deadline, so a renewal can never outlast it.
#pragma once

#include <string>

#include "base/status.h"
#include "leader/lease_record.h"
#include "base/clock.h"

namespace nodevol::leader {

class LeaseStore {
 public:
  virtual ~LeaseStore() = default;

  virtual Status Get(LeaseRecord* record, std::string* resource_version) = 0;
  virtual Status Create(const LeaseRecord& record, std::string* resource_version) = 0;
  virtual Status Update(const LeaseRecord& record, const std::string& resource_version,
                        std::string* new_resource_version) = 0;
  // Every following call must end (as an error if need be) within `limit`.
  virtual void SetCallTimeout(Clock::Duration limit) = 0;
  // "namespace/name", for logs.
  virtual std::string Describe() const = 0;
};

}  // namespace nodevol::leader
