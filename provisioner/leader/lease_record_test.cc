#include "leader/lease_record.h"

#include <gtest/gtest.h>

namespace nodevol::leader {
namespace {

using std::chrono::microseconds;
using std::chrono::seconds;

// 2006-01-02T15:04:05Z, Go's reference time.
const Clock::WallTime kGoReference = Clock::WallTime(seconds(1136214245));

Clock::WallTime MustParse(const std::string& text) {
  Clock::WallTime t;
  Status st = ParseMicroTime(text, &t);
  EXPECT_TRUE(st.ok()) << text << ": " << st.ToString();
  return t;
}

TEST(MicroTimeTest, FormatsUtcWithSixDigits) {
  EXPECT_EQ(FormatMicroTime(kGoReference), "2006-01-02T15:04:05.000000Z");
  EXPECT_EQ(FormatMicroTime(kGoReference + microseconds(123456)), "2006-01-02T15:04:05.123456Z");
  // Nanoseconds are cut, not rounded.
  EXPECT_EQ(FormatMicroTime(kGoReference + std::chrono::nanoseconds(999999999)), "2006-01-02T15:04:05.999999Z");
  EXPECT_EQ(FormatMicroTime(Clock::WallTime(seconds(951782400))), "2000-02-29T00:00:00.000000Z");  // leap day
}

TEST(MicroTimeTest, Parses) {
  EXPECT_EQ(MustParse("2006-01-02T15:04:05.000000Z"), kGoReference);
  EXPECT_EQ(MustParse("2006-01-02T15:04:05.123456Z"), kGoReference + microseconds(123456));
  EXPECT_EQ(MustParse("2006-01-02T15:04:05Z"), kGoReference);
  EXPECT_EQ(MustParse("2006-01-02T15:04:05.5Z"), kGoReference + microseconds(500000));
  EXPECT_EQ(MustParse("2006-01-02T15:04:05.123456789Z"), kGoReference + microseconds(123456));
  EXPECT_EQ(MustParse("2006-01-02T17:04:05.000000+02:00"), kGoReference);
  EXPECT_EQ(MustParse("2006-01-02T10:34:05.000000-04:30"), kGoReference);
  EXPECT_EQ(MustParse("2006-01-03T00:04:05+09:00"), kGoReference);
}

TEST(MicroTimeTest, RoundTrips) {
  Clock::WallTime t = TruncateToMicros(std::chrono::system_clock::now());
  EXPECT_EQ(MustParse(FormatMicroTime(t)), t);
}

TEST(MicroTimeTest, RejectsMalformed) {
  for (const char* bad : {"", "2006-01-02", "2006-01-02T15:04:05", "2006-01-02 15:04:05Z", "2006-13-02T15:04:05Z",
                          "2006-02-30T15:04:05Z", "2006-01-02T24:04:05Z", "2006-01-02T15:04:05.Z",
                          "2006-01-02T15:04:05.000000Zjunk", "2006-01-02T15:04:05+0200", "06-01-02T15:04:05Z",
                          "2006-01-02T15:04:05.000000+25:00", "null"}) {
    Clock::WallTime t;
    EXPECT_FALSE(ParseMicroTime(bad, &t).ok()) << bad;
  }
}

TEST(LeaseRecordTest, ReadsAnApiserverLease) {
  auto lease = nlohmann::json::parse(R"({
    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
    "metadata": {"name": "nodevol.io-provisioner", "namespace": "nodevol", "resourceVersion": "4242"},
    "spec": {"holderIdentity": "provisioner-7d9f_0b1c", "leaseDurationSeconds": 15,
             "acquireTime": "2006-01-02T15:04:05.000000Z", "renewTime": "2006-01-02T15:04:07.250000Z",
             "leaseTransitions": 3}})");
  LeaseRecord record;
  ASSERT_TRUE(RecordFromLeaseSpec(lease["spec"], &record).ok());
  EXPECT_EQ(record.holder_identity, "provisioner-7d9f_0b1c");
  EXPECT_EQ(record.lease_duration_seconds, 15);
  EXPECT_EQ(record.acquire_time, kGoReference);
  EXPECT_EQ(record.renew_time, kGoReference + microseconds(2250000));
  EXPECT_EQ(record.lease_transitions, 3);
}

TEST(LeaseRecordTest, MissingAndNullFieldsAreZero) {
  LeaseRecord record;
  record.holder_identity = "stale";
  ASSERT_TRUE(RecordFromLeaseSpec(nlohmann::json::parse(R"({"holderIdentity": null, "renewTime": null})"), &record).ok());
  EXPECT_EQ(record, LeaseRecord{});
  ASSERT_TRUE(RecordFromLeaseSpec(nlohmann::json(), &record).ok());
  EXPECT_EQ(record, LeaseRecord{});
}

TEST(LeaseRecordTest, RejectsWrongTypes) {
  for (const char* bad : {R"({"holderIdentity": 3})", R"({"leaseDurationSeconds": "15"})",
                          R"({"leaseTransitions": 1.5})", R"({"renewTime": "yesterday"})", R"({"acquireTime": 0})",
                          R"({"leaseDurationSeconds": 99999999999})", R"([1])"}) {
    LeaseRecord record;
    EXPECT_FALSE(RecordFromLeaseSpec(nlohmann::json::parse(bad), &record).ok()) << bad;
  }
}

TEST(LeaseRecordTest, WritesWhatItReads) {
  LeaseRecord record{"me", 15, kGoReference, kGoReference + microseconds(1), 7};
  nlohmann::json lease = LeaseObject("ns", "name", record, "99");
  EXPECT_EQ(lease["apiVersion"], "coordination.k8s.io/v1");
  EXPECT_EQ(lease["kind"], "Lease");
  EXPECT_EQ(lease["metadata"]["resourceVersion"], "99");
  EXPECT_EQ(lease["spec"]["renewTime"], "2006-01-02T15:04:05.000001Z");
  LeaseRecord back;
  ASSERT_TRUE(RecordFromLeaseSpec(nlohmann::json::parse(lease.dump())["spec"], &back).ok());
  EXPECT_EQ(back, record);
  EXPECT_FALSE(LeaseObject("ns", "name", record, "")["metadata"].contains("resourceVersion"));
  // Unset times are left out rather than written as the epoch.
  EXPECT_FALSE(LeaseSpecFromRecord(LeaseRecord{}).contains("renewTime"));
}

}  // namespace
}  // namespace nodevol::leader
