#include "base/names.h"

#include <gtest/gtest.h>

#include <vector>

#include "base/host_port.h"

namespace nodevol {
namespace {

TEST(VolumeName, AcceptsKubernetesPvNames) {
  EXPECT_TRUE(ValidateVolumeName("pvc-0b2f6f5e-7c1d-4a5e-9d2b-3c4d5e6f7a8b").ok());
  EXPECT_TRUE(ValidateVolumeName("a").ok());
  EXPECT_TRUE(ValidateVolumeName("data.v1_x-2").ok());
  EXPECT_TRUE(ValidateVolumeName(std::string(200, 'a')).ok());
}

TEST(VolumeName, RejectsWhatCouldEscapeOrConfuse) {
  for (const std::string& bad : std::vector<std::string>{"", ".", "..", ".hidden", "-x", "a/b", "../x", "a b", "a\nb", "ä", std::string(201, 'a'),
                          std::string("a\0b", 3)}) {
    Status st = ValidateVolumeName(bad);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << "accepted: " << bad;
  }
}

TEST(VolumeName, MessageShowsControlBytesVisibly) {
  Status st = ValidateVolumeName(std::string("a\0b", 3));
  EXPECT_NE(st.message().find("\\x00"), std::string::npos) << st.message();
}

TEST(PoolName, LowerCaseDnsLabel) {
  EXPECT_TRUE(ValidatePoolName("fast-ssd").ok());
  EXPECT_FALSE(ValidatePoolName("Fast").ok());
  EXPECT_FALSE(ValidatePoolName("-x").ok());
  EXPECT_FALSE(ValidatePoolName("a_b").ok());
  EXPECT_FALSE(ValidatePoolName(std::string(64, 'a')).ok());
}

TEST(JoinHostPort, BracketsIpv6LiteralsOnly) {
  EXPECT_EQ(JoinHostPort("10.0.0.1", 9809), "10.0.0.1:9809");
  EXPECT_EQ(JoinHostPort("fd00::1", 9809), "[fd00::1]:9809");
  EXPECT_EQ(JoinHostPort("[fd00::1]", "443"), "[fd00::1]:443");
  EXPECT_EQ(JoinHostPort("node-1.example.com", "6443"), "node-1.example.com:6443");
}

}  // namespace
}  // namespace nodevol
