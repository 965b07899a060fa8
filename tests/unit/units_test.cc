#include "util/units.h"

#include <gtest/gtest.h>

namespace gpulane {
namespace {

TEST(ParseSizeBytes, AcceptsTheFormsUsersType) {
  EXPECT_EQ(*ParseSizeBytes("20GiB"), 20ULL << 30);
  EXPECT_EQ(*ParseSizeBytes("20G"), 20ULL << 30);
  EXPECT_EQ(*ParseSizeBytes("20 gib"), 20ULL << 30);
  EXPECT_EQ(*ParseSizeBytes("512MiB"), 512ULL << 20);
  EXPECT_EQ(*ParseSizeBytes("512M"), 512ULL << 20);
  EXPECT_EQ(*ParseSizeBytes("1048576B"), 1048576ULL);
  EXPECT_EQ(*ParseSizeBytes("32212254720b"), 30ULL << 30);
  EXPECT_EQ(*ParseSizeBytes("1.5GiB"), 3ULL << 29);
  EXPECT_EQ(*ParseSizeBytes("1T"), 1ULL << 40);
  EXPECT_EQ(*ParseSizeBytes(" 8 KiB "), 8ULL << 10);
  EXPECT_EQ(*ParseSizeBytes("0"), 0ULL) << "zero is zero in every unit";
}

// GPU memory is sold and reported in binary units (an "80GB" card has 80 GiB; nvidia-smi prints
// MiB): GB, MB, KB and TB mean GiB, MiB, KiB and TiB, never powers of ten.
TEST(ParseSizeBytes, DecimalLookingUnitsAreBinaryAsOnGpus) {
  EXPECT_EQ(*ParseSizeBytes("2GB"), 2ULL << 30);
  EXPECT_EQ(*ParseSizeBytes("30gb"), 30ULL << 30);
  EXPECT_EQ(*ParseSizeBytes("512MB"), 512ULL << 20);
  EXPECT_EQ(*ParseSizeBytes("4KB"), 4ULL << 10);
  EXPECT_EQ(*ParseSizeBytes("1TB"), 1ULL << 40);
  EXPECT_EQ(*ParseSizeBytes("80GB"), *ParseSizeBytes("80GiB"));
}

// "--mem 30" could mean 30 bytes or 30 GiB: refused, with the likely meaning as a hint.
TEST(ParseSizeBytes, ANumberWithoutAUnitIsRefusedWithAHint) {
  auto thirty = ParseSizeBytes("30");
  ASSERT_FALSE(thirty.ok());
  EXPECT_EQ(thirty.error().kind, ErrorKind::kInvalidArgument);
  EXPECT_NE(thirty.error().message.find("'30' has no unit"), std::string::npos) << thirty.error().message;
  EXPECT_NE(thirty.error().message.find("did you mean 30GiB?"), std::string::npos) << thirty.error().message;
  EXPECT_EQ(thirty.error().message.find('\n'), std::string::npos);
  auto fraction = ParseSizeBytes("1.5");
  ASSERT_FALSE(fraction.ok());
  EXPECT_NE(fraction.error().message.find("did you mean 1.5GiB?"), std::string::npos) << fraction.error().message;
  // A number that can only be a byte count gets the bytes suffix as its hint.
  auto bytes = ParseSizeBytes("32212254720");
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.error().message.find("did you mean 32212254720B (30.0 GiB)?"), std::string::npos)
      << bytes.error().message;
}

TEST(ParseSizeBytes, RejectsGarbageWithAMessageNamingIt) {
  for (const char* bad : {"", "GiB", "20x", "twenty", "-5G", "1.2.3G", "20 GiBs"}) {
    auto r = ParseSizeBytes(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().kind, ErrorKind::kInvalidArgument);
    EXPECT_NE(r.error().message.find(std::string("'") + bad + "'"), std::string::npos) << r.error().message;
  }
}

TEST(ParseDurationS, UnitsAndCombinations) {
  EXPECT_DOUBLE_EQ(*ParseDurationS("90"), 90);
  EXPECT_DOUBLE_EQ(*ParseDurationS("500ms"), 0.5);
  EXPECT_DOUBLE_EQ(*ParseDurationS("10m"), 600);
  EXPECT_DOUBLE_EQ(*ParseDurationS("1h30m"), 5400);
  EXPECT_DOUBLE_EQ(*ParseDurationS("2d"), 172800);
  EXPECT_FALSE(ParseDurationS("").ok());
  EXPECT_FALSE(ParseDurationS("soon").ok());
  EXPECT_FALSE(ParseDurationS("5 parsecs").ok());
  EXPECT_FALSE(ParseDurationS("10 5").ok());
}

TEST(FormatBytes, ReadableBinaryUnits) {
  EXPECT_EQ(FormatBytes(512ULL << 20), "512 MiB");
  EXPECT_EQ(FormatBytes(3328599654ULL), "3.1 GiB");
  EXPECT_EQ(FormatBytes(20ULL << 30), "20.0 GiB");
  EXPECT_EQ(FormatBytes(150754820096ULL), "140 GiB");
}

}  // namespace
}  // namespace gpulane
