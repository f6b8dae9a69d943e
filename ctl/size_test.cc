#include "base/size.h"

#include <gtest/gtest.h>

namespace nodevol {
namespace {

TEST(ParseSize, PlainBytes) {
  EXPECT_EQ(ParseSize("1"), 1u);
  EXPECT_EQ(ParseSize("1073741824"), 1073741824u);
  EXPECT_EQ(ParseSize("18446744073709551615"), 18446744073709551615u);
}

TEST(ParseSize, DecimalSuffixes) {
  EXPECT_EQ(ParseSize("1k"), 1000u);
  EXPECT_EQ(ParseSize("500M"), 500'000'000u);
  EXPECT_EQ(ParseSize("2G"), 2'000'000'000u);
  EXPECT_EQ(ParseSize("3T"), 3'000'000'000'000u);
}

TEST(ParseSize, BinarySuffixes) {
  EXPECT_EQ(ParseSize("1Ki"), 1024u);
  EXPECT_EQ(ParseSize("5Mi"), 5u << 20);
  EXPECT_EQ(ParseSize("10Gi"), 10ULL << 30);
  EXPECT_EQ(ParseSize("16777215Ti"), 16777215ULL << 40);
}

TEST(ParseSize, RejectsZeroAndNegative) {
  EXPECT_EQ(ParseSize("0"), std::nullopt);
  EXPECT_EQ(ParseSize("0Gi"), std::nullopt);
  EXPECT_EQ(ParseSize("-1"), std::nullopt);
  EXPECT_EQ(ParseSize("-5Gi"), std::nullopt);
}

TEST(ParseSize, RejectsMalformed) {
  for (const char* bad : {"", "Gi", "10 Gi", " 10", "10Gi ", "+10", "1.5Gi", "10g", "10K", "10KiB",
                          "10GB", "10Gii", "1e9", "0x10", "10P", "ten"}) {
    EXPECT_EQ(ParseSize(bad), std::nullopt) << '"' << bad << '"';
  }
}

TEST(ParseSize, RejectsOverflow) {
  EXPECT_EQ(ParseSize("18446744073709551616"), std::nullopt);
  EXPECT_EQ(ParseSize("99999999999999999999999"), std::nullopt);
  EXPECT_EQ(ParseSize("16777216Ti"), std::nullopt);
  EXPECT_EQ(ParseSize("18446744073709552k"), std::nullopt);
}

TEST(FormatSize, Units) {
  EXPECT_EQ(FormatSize(0), "0B");
  EXPECT_EQ(FormatSize(1023), "1023B");
  EXPECT_EQ(FormatSize(1024), "1.0KiB");
  EXPECT_EQ(FormatSize(1536), "1.5KiB");
  EXPECT_EQ(FormatSize(10ULL << 30), "10.0GiB");
  EXPECT_EQ(FormatSize(3ULL << 40), "3.0TiB");
  EXPECT_EQ(FormatSize((1ULL << 20) - 1), "1.0MiB");
  EXPECT_EQ(FormatSize(18446744073709551615u), "16.0EiB");
}

}  // namespace
}  // namespace nodevol
