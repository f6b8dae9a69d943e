// LeaseRecord: what leader election keeps in a coordination.k8s.io/v1 Lease
// (client-go's LeaderElectionRecord), and its JSON form.
//
// Times are MicroTime: RFC 3339 in UTC with exactly six fractional digits,
// "2006-01-02T15:04:05.000000Z". Records carry times already truncated to
// microseconds so a record survives a round trip through the API unchanged.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "base/clock.h"

namespace nodevol::leader {

struct LeaseRecord {
  std::string holder_identity;  // "" = nobody (released)
  int lease_duration_seconds = 0;
  Clock::WallTime acquire_time{};  // the epoch = unset
  Clock::WallTime renew_time{};
  int lease_transitions = 0;

  bool operator==(const LeaseRecord&) const = default;
};

// Drops what MicroTime cannot carry.
Clock::WallTime TruncateToMicros(Clock::WallTime t);

std::string FormatMicroTime(Clock::WallTime t);
// Accepts RFC 3339 with "Z" or a numeric offset and 0 to 9 fractional
// digits (what the apiserver and other clients write); finer than
// microseconds is truncated.
Status ParseMicroTime(std::string_view text, Clock::WallTime* out);

// Lease.spec for a record (unset times are left out, as Go writes null).
nlohmann::json LeaseSpecFromRecord(const LeaseRecord& record);
// The record in a Lease.spec; missing or null fields are zero, as in Go.
Status RecordFromLeaseSpec(const nlohmann::json& spec, LeaseRecord* out);

// A whole Lease object for POST/PUT; `resource_version` "" leaves it out.
nlohmann::json LeaseObject(const std::string& namespace_name, const std::string& name, const LeaseRecord& record,
                           const std::string& resource_version);

}  // namespace nodevol::leader
