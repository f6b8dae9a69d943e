#include "leader/lease_record.h"

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <utility>

namespace nodevol::leader {
namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::nanoseconds;

bool ReadInt(std::string_view text, size_t pos, size_t len, int* out) {
  if (pos + len > text.size()) return false;
  for (size_t i = pos; i < pos + len; ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
  }
  auto [end, ec] = std::from_chars(text.data() + pos, text.data() + pos + len, *out);
  return ec == std::errc();
}

bool Expect(std::string_view text, size_t pos, char c) { return pos < text.size() && text[pos] == c; }

Status BadTime(std::string_view text) {
  return Status::InvalidArgument("time \"" + std::string(text) +
                                 "\" is not RFC 3339 (expected e.g. 2006-01-02T15:04:05.000000Z)");
}

}  // namespace

Clock::WallTime TruncateToMicros(Clock::WallTime t) {
  auto since = t.time_since_epoch();
  auto micros = std::chrono::floor<microseconds>(since);
  return Clock::WallTime(duration_cast<Clock::WallTime::duration>(micros));
}

std::string FormatMicroTime(Clock::WallTime t) {
  auto micros = std::chrono::floor<microseconds>(t.time_since_epoch());
  auto days = std::chrono::floor<std::chrono::days>(micros);
  std::chrono::year_month_day ymd{std::chrono::sys_days(days)};
  std::chrono::hh_mm_ss<microseconds> hms(micros - days);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d.%06lldZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                static_cast<int>(hms.seconds().count()), static_cast<long long>(hms.subseconds().count()));
  return buf;
}

Status ParseMicroTime(std::string_view text, Clock::WallTime* out) {
  int year, month, day, hour, minute, second;
  if (!ReadInt(text, 0, 4, &year) || !Expect(text, 4, '-') || !ReadInt(text, 5, 2, &month) ||
      !Expect(text, 7, '-') || !ReadInt(text, 8, 2, &day) || !(Expect(text, 10, 'T') || Expect(text, 10, 't')) ||
      !ReadInt(text, 11, 2, &hour) || !Expect(text, 13, ':') || !ReadInt(text, 14, 2, &minute) ||
      !Expect(text, 16, ':') || !ReadInt(text, 17, 2, &second)) {
    return BadTime(text);
  }
  size_t pos = 19;
  int64_t nanos = 0;
  if (Expect(text, pos, '.')) {
    ++pos;
    int digits = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (digits < 9) {
        nanos = nanos * 10 + (text[pos] - '0');
        ++digits;
      }
      ++pos;
    }
    if (digits == 0) return BadTime(text);
    for (int i = digits; i < 9; ++i) nanos *= 10;
  }
  int offset_minutes = 0;
  if (Expect(text, pos, 'Z') || Expect(text, pos, 'z')) {
    ++pos;
  } else if (Expect(text, pos, '+') || Expect(text, pos, '-')) {
    int sign = text[pos] == '-' ? -1 : 1;
    int oh, om;
    if (!ReadInt(text, pos + 1, 2, &oh) || !Expect(text, pos + 3, ':') || !ReadInt(text, pos + 4, 2, &om) ||
        oh > 23 || om > 59) {
      return BadTime(text);
    }
    offset_minutes = sign * (oh * 60 + om);
    pos += 6;
  } else {
    return BadTime(text);
  }
  if (pos != text.size()) return BadTime(text);

  std::chrono::year_month_day ymd{std::chrono::year(year), std::chrono::month(static_cast<unsigned>(month)),
                                  std::chrono::day(static_cast<unsigned>(day))};
  if (!ymd.ok() || hour > 23 || minute > 59 || second > 59) return BadTime(text);
  auto t = std::chrono::sys_days(ymd).time_since_epoch() + std::chrono::hours(hour) +
           std::chrono::minutes(minute - offset_minutes) + std::chrono::seconds(second);
  auto micros = duration_cast<microseconds>(t) + duration_cast<microseconds>(nanoseconds(nanos));
  *out = Clock::WallTime(duration_cast<Clock::WallTime::duration>(micros));
  return Status::Ok();
}

nlohmann::json LeaseSpecFromRecord(const LeaseRecord& record) {
  nlohmann::json spec = {
      {"holderIdentity", record.holder_identity},
      {"leaseDurationSeconds", record.lease_duration_seconds},
      {"leaseTransitions", record.lease_transitions},
  };
  if (record.acquire_time != Clock::WallTime{}) spec["acquireTime"] = FormatMicroTime(record.acquire_time);
  if (record.renew_time != Clock::WallTime{}) spec["renewTime"] = FormatMicroTime(record.renew_time);
  return spec;
}

Status RecordFromLeaseSpec(const nlohmann::json& spec, LeaseRecord* out) {
  LeaseRecord record;
  if (spec.is_null()) {
    *out = record;
    return Status::Ok();
  }
  if (!spec.is_object()) return Status::InvalidArgument("Lease spec is not an object");
  auto field = [&](const char* name) -> const nlohmann::json* {
    auto it = spec.find(name);
    return it == spec.end() || it->is_null() ? nullptr : &*it;
  };
  if (const auto* v = field("holderIdentity")) {
    if (!v->is_string()) return Status::InvalidArgument("Lease spec.holderIdentity is not a string");
    record.holder_identity = v->get<std::string>();
  }
  for (auto [name, dest] : {std::pair{"leaseDurationSeconds", &record.lease_duration_seconds},
                            std::pair{"leaseTransitions", &record.lease_transitions}}) {
    if (const auto* v = field(name)) {
      if (!v->is_number_integer()) return Status::InvalidArgument(std::string("Lease spec.") + name + " is not an integer");
      int64_t n = v->get<int64_t>();
      if (n < INT32_MIN || n > INT32_MAX) return Status::InvalidArgument(std::string("Lease spec.") + name + " is out of range");
      *dest = static_cast<int>(n);
    }
  }
  for (auto [name, dest] :
       {std::pair{"acquireTime", &record.acquire_time}, std::pair{"renewTime", &record.renew_time}}) {
    if (const auto* v = field(name)) {
      if (!v->is_string()) return Status::InvalidArgument(std::string("Lease spec.") + name + " is not a string");
      NODEVOL_RETURN_IF_ERROR(ParseMicroTime(v->get<std::string>(), dest).WithContext(std::string("Lease spec.") + name));
    }
  }
  *out = record;
  return Status::Ok();
}

nlohmann::json LeaseObject(const std::string& namespace_name, const std::string& name, const LeaseRecord& record,
                           const std::string& resource_version) {
  nlohmann::json lease = {
      {"apiVersion", "coordination.k8s.io/v1"},
      {"kind", "Lease"},
      {"metadata", {{"name", name}, {"namespace", namespace_name}}},
      {"spec", LeaseSpecFromRecord(record)},
  };
  if (!resource_version.empty()) lease["metadata"]["resourceVersion"] = resource_version;
  return lease;
}

}  // namespace nodevol::leader
