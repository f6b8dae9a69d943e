#include "kube/quantity.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace nodevol::kube {
namespace {

Quantity MustParse(const std::string& text) {
  Quantity q;
  Status st = Quantity::Parse(text, &q);
  EXPECT_TRUE(st.ok()) << text << ": " << st.ToString();
  return q;
}

std::string Canonical(const std::string& text) { return MustParse(text).ToString(); }

uint64_t Bytes(const std::string& text) {
  uint64_t out = 0;
  Status st = MustParse(text).ToBytes(&out);
  EXPECT_TRUE(st.ok()) << text << ": " << st.ToString();
  return out;
}

// Expected strings below are Kubernetes' own: cases marked [apimachinery]
// are copied from k8s.io/apimachinery pkg/api/resource/quantity_test.go
// (TestQuantityParseEmit, TestQuantityString's alternates, TestQuantityParse).
TEST(QuantityTest, CanonicalFormKeepsTheInputFormat) {
  struct Case {
    const char* in;
    const char* out;
  };
  const std::vector<Case> cases = {
      // [apimachinery] TestQuantityParseEmit
      {"1Ki", "1Ki"},
      {"1Mi", "1Mi"},
      {"1Gi", "1Gi"},
      {"1024Mi", "1Gi"},
      {"1000M", "1G"},
      {".001Ki", "1024m"},
      {".000001Ki", "1024u"},
      {".000000001Ki", "1024n"},
      {".000000000001Ki", "2n"},
      // [apimachinery] TestQuantityString: alternate spelling -> canonical
      {"307200Ki", "300Mi"},
      {"1025024Mi", "1001Gi"},
      {"1024Gi", "1Ti"},
      {"5000m", "5"},
      {"0.5", "500m"},
      {"0.001T", "1G"},
      {"1000u", "1m"},
      {"1.08", "1080m"},
      {"1080000000n", "1080m"},
      {"1000E", "1e21"},
      {"5000E", "5e21"},
      {"1000000E", "1e24"},
      {".001e12", "1e9"},
      {"0.001e0", "1e-3"},
      {"1000e-12", "1e-9"},
      {"00", "0"},
      {"1234567M", "1234567M"},
      {"1025", "1025"},
      {"3k", "3k"},
      {"80e-3", "80e-3"},
      {"300e6", "300e6"},
      // The brief's examples.
      {"1.5Gi", "1536Mi"},
      {"1.5", "1500m"},
      {"1e3", "1e3"},
      {"1E6", "1e6"},
      {"1.2e3", "1200"},
      {"1.3E+6", "1300e3"},
      // Binary values below 1024 or with a fraction print as DecimalSI.
      {"1.5Ki", "1536"},
      {"0.5Ki", "512"},
      {"0.5Mi", "512Ki"},
      {"100.035Ki", "102435840m"},
      // Sign, zero, odd spellings.
      {"-1Gi", "-1Gi"},
      {"-1.5", "-1500m"},
      {"+1Ki", "1Ki"},
      {"0", "0"},
      {"0Ki", "0"},
      {"-0", "0"},
      {".", "0"},
      {"1.", "1"},
      {"1.G", "1G"},
      {".0001k", "100m"},
      {"100.035k", "100035"},
      {"12E", "12E"},
      // Nothing finer than a nano: rounded away from zero. [apimachinery]
      {"3.001n", "4n"},
      {"1.1E-9", "2e-9"},
      {"0.00000012345", "124n"},
      {"0.0000000001", "1n"},
      {"-0.0000000001", "-1n"},
      // Binary values are capped at 2^63-1. [apimachinery] "9Ei"
      {"9Ei", "9223372036854775807"},
      {"9223372036854775807Ki", "9223372036854775807"},
  };
  for (const Case& c : cases) EXPECT_EQ(Canonical(c.in), c.out) << c.in;
}

TEST(QuantityTest, KeepsTheFormat) {
  EXPECT_EQ(MustParse("1Gi").format(), Quantity::Format::kBinarySI);
  EXPECT_EQ(MustParse("1G").format(), Quantity::Format::kDecimalSI);
  EXPECT_EQ(MustParse("1").format(), Quantity::Format::kDecimalSI);
  EXPECT_EQ(MustParse("1e9").format(), Quantity::Format::kDecimalExponent);
  EXPECT_EQ(MustParse("1E").format(), Quantity::Format::kDecimalSI);  // exa, not an exponent
  // [apimachinery] "0.000000000001Ki": rounds up, changes format.
  EXPECT_EQ(MustParse("0.000000000001Ki").format(), Quantity::Format::kDecimalSI);
}

TEST(QuantityTest, RejectsWhatTheApiserverRejects) {
  // [apimachinery] TestQuantityParse's invalid list, plus a few more.
  for (const char* bad : {"", "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-",
                          " 1", "1 ", "1k ", "Ki", "+", "-", "1e", "1K", "1KI", "1gi", "1Ki5", "1e3.5", "1ee3",
                          "1e99999999999", "1 Gi", "0x10", "1,5Gi", "\xff"}) {
    Quantity q;
    Status st = Quantity::Parse(bad, &q);
    EXPECT_FALSE(st.ok()) << '"' << bad << "\" parsed as " << q.ToString();
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << bad;
  }
  Quantity q;
  Status st = Quantity::Parse("10Gb", &q);
  EXPECT_NE(st.message().find("10Gb"), std::string::npos) << st.message();
}

TEST(QuantityTest, BytesAreTheCeiling) {
  EXPECT_EQ(Bytes("0"), 0u);
  EXPECT_EQ(Bytes("1"), 1u);
  EXPECT_EQ(Bytes("1Ki"), 1024u);
  EXPECT_EQ(Bytes("1.5Gi"), 1536ULL << 20);
  EXPECT_EQ(Bytes("10G"), 10'000'000'000ULL);
  EXPECT_EQ(Bytes("1e3"), 1000u);
  EXPECT_EQ(Bytes("0.5"), 1u);
  EXPECT_EQ(Bytes("1n"), 1u);
  EXPECT_EQ(Bytes("1500m"), 2u);
  EXPECT_EQ(Bytes("2000m"), 2u);
  EXPECT_EQ(Bytes("1.1k"), 1100u);
  EXPECT_EQ(Bytes("1.0001k"), 1001u);
  EXPECT_EQ(Bytes("0.05Gi"), 53687092u);  // 53687091.2
  EXPECT_EQ(Bytes("1e19"), 10'000'000'000'000'000'000ULL);
  EXPECT_EQ(Bytes("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(Bytes("18446744073709551614.5"), UINT64_MAX);
  EXPECT_EQ(Bytes("16Ei"), 9223372036854775807ULL);  // capped like Kubernetes
  EXPECT_EQ(Bytes("3Ei"), 3ULL << 60);
}

TEST(QuantityTest, BytesRefuseNegativeAndOverflow) {
  for (const char* bad : {"-1", "-1Gi", "-0.5", "18446744073709551616", "18446744073709551615.5", "20E", "1e20",
                          "1e2147483647"}) {
    uint64_t out = 42;
    Status st = MustParse(bad).ToBytes(&out);
    EXPECT_FALSE(st.ok()) << bad << " gave " << out;
  }
}

TEST(QuantityTest, HugeExponentsStayCheap) {
  EXPECT_EQ(Canonical("1e2147483647"), "10e2147483646");
  EXPECT_EQ(Canonical("1e-2147483648"), "1e-9");
  EXPECT_EQ(Canonical("5E-999"), "1e-9");  // DecimalExponent keeps its form
  EXPECT_EQ(Canonical("0.000000000000000005"), "1n");
}

TEST(QuantityTest, Compare) {
  EXPECT_EQ(MustParse("1000M").Compare(MustParse("1G")), 0);
  EXPECT_EQ(MustParse("1Gi").Compare(MustParse("1G")), 1);
  EXPECT_EQ(MustParse("1G").Compare(MustParse("1Gi")), -1);
  EXPECT_EQ(MustParse("100m").Compare(MustParse("50m")), 1);     // [apimachinery] TestQuantityCmp
  EXPECT_EQ(MustParse("10000T").Compare(MustParse("100Gi")), 1);  // [apimachinery] TestQuantityCmp
  EXPECT_EQ(MustParse("-1").Compare(MustParse("0")), -1);
  EXPECT_EQ(MustParse("-2").Compare(MustParse("-1")), -1);
  EXPECT_EQ(MustParse("0").Compare(MustParse("-0")), 0);
  EXPECT_EQ(MustParse("1.5").Compare(MustParse("1500m")), 0);
  EXPECT_EQ(MustParse("999m").Compare(MustParse("1")), -1);
}

TEST(QuantityTest, FormatBinaryBytes) {
  EXPECT_EQ(FormatBinaryBytes(0), "0");
  EXPECT_EQ(FormatBinaryBytes(1), "1");
  EXPECT_EQ(FormatBinaryBytes(1000), "1k");  // below 1024 Kubernetes prints DecimalSI
  EXPECT_EQ(FormatBinaryBytes(1023), "1023");
  EXPECT_EQ(FormatBinaryBytes(1024), "1Ki");
  EXPECT_EQ(FormatBinaryBytes(1536), "1536");
  EXPECT_EQ(FormatBinaryBytes(1ULL << 30), "1Gi");
  EXPECT_EQ(FormatBinaryBytes(1536ULL << 20), "1536Mi");
  EXPECT_EQ(FormatBinaryBytes(5ULL << 40), "5Ti");
  EXPECT_EQ(FormatBinaryBytes(3ULL << 60), "3Ei");
  EXPECT_EQ(FormatBinaryBytes(1025ULL << 50), "1025Pi");
  // Beyond 2^63-1 a binary suffix would be capped by the apiserver.
  EXPECT_EQ(FormatBinaryBytes(9223372036854775807ULL), "9223372036854775807");
  EXPECT_EQ(FormatBinaryBytes(1ULL << 63), "9223372036854775808");
  EXPECT_EQ(FormatBinaryBytes(UINT64_MAX - 1023), "18446744073709550592");
}

TEST(QuantityTest, FormatBinaryBytesRoundTrips) {
  for (uint64_t bytes : std::vector<uint64_t>{0ULL, 1ULL, 999ULL, 1000ULL, 1024ULL, 4097ULL, 10ULL << 30, (10ULL << 30) + 1,
                         123456789012345ULL, 1ULL << 62, 9223372036854775807ULL, 1ULL << 63, UINT64_MAX}) {
    std::string text = FormatBinaryBytes(bytes);
    EXPECT_EQ(Bytes(text), bytes) << text;
    // The apiserver prints it back unchanged.
    EXPECT_EQ(Canonical(text), text);
  }
}

}  // namespace
}  // namespace nodevol::kube
