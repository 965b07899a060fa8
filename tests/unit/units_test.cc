#include "util/units.h"

#include <fmt/format.h>
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

// Found by fuzz_units (UBSan): a byte count too large for any size, typed without a unit, made the
// "did you mean" hint convert 3.2e19 to std::uint64_t (undefined behaviour) to show it as a size.
TEST(ParseSizeBytes, AHugeNumberIsTooLargeWithOrWithoutAUnit) {
  for (const std::string& text : {std::string("32215225452254720720"), std::string("32215225452254720720B"),
                                  std::string(25, '9') + "GiB", std::string("16777216TiB")}) {
    auto r = ParseSizeBytes(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.error().message, fmt::format("'{}' is too large for a memory size (at most 16 EiB)", text)) << text;
  }
}

// Found by fuzz_units: sizes from 2^63 bytes up were rounded with std::llround, whose long long
// ends at 2^63, so 1e19 bytes read as 9223372036854775808.
TEST(ParseSizeBytes, SizesAbove2To63AreReadAsWritten) {
  EXPECT_EQ(*ParseSizeBytes("10000000000000000000B"), 10000000000000000000ULL);
  EXPECT_EQ(*ParseSizeBytes("9223372036854775808B"), 9223372036854775808ULL);
  EXPECT_EQ(*ParseSizeBytes("16000000TiB"), 16000000ULL << 40);
  EXPECT_FALSE(ParseSizeBytes("16777216TiB").ok()) << "2^64 bytes: no size";
}

// Found by fuzz_units: 308 digits of days overflowed the sum to infinity, which was returned as a
// duration.
TEST(ParseDurationS, ADurationTooLongForADoubleIsRefused) {
  const std::string days = std::string(308, '9') + "d";
  auto r = ParseDurationS(days);
  ASSERT_FALSE(r.ok()) << *r;
  EXPECT_EQ(r.error().kind, ErrorKind::kInvalidArgument);
}

TEST(ParseDurationS, UnitsAndCombinations) {
  EXPECT_DOUBLE_EQ(*ParseDurationOrSecondsS("90"), 90);
  EXPECT_DOUBLE_EQ(*ParseDurationOrSecondsS("1h30"), 3630) << "config files: a bare number (the 30) is seconds";
  EXPECT_DOUBLE_EQ(*ParseDurationS("0"), 0) << "0 is the same in every unit";
  EXPECT_DOUBLE_EQ(*ParseDurationS("500ms"), 0.5);
  EXPECT_DOUBLE_EQ(*ParseDurationS("10m"), 600);
  EXPECT_DOUBLE_EQ(*ParseDurationS("1h30m"), 5400);
  EXPECT_DOUBLE_EQ(*ParseDurationS("2d"), 172800);
  EXPECT_FALSE(ParseDurationS("").ok());
  EXPECT_FALSE(ParseDurationS("soon").ok());
  EXPECT_FALSE(ParseDurationS("5 parsecs").ok());
  EXPECT_FALSE(ParseDurationS("10 5").ok());
}

// `--time-limit 90` was read as 90 seconds; Slurm users mean 90 minutes. A bare number is refused
// on the command line, with the unit the option most likely means.
TEST(ParseDurationS, ABareNumberIsRefusedWithAHint) {
  auto r = ParseDurationS("90", "m");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kInvalidArgument);
  EXPECT_NE(r.error().message.find("'90' has no unit: did you mean 90m?"), std::string::npos) << r.error().message;
  EXPECT_FALSE(ParseDurationS("1h30").ok()) << "a trailing bare number too";
  EXPECT_FALSE(ParseDurationS("2.5").ok());
}

TEST(FormatBytes, ReadableBinaryUnits) {
  EXPECT_EQ(FormatBytes(512ULL << 20), "512 MiB");
  EXPECT_EQ(FormatBytes(3328599654ULL), "3.1 GiB");
  EXPECT_EQ(FormatBytes(20ULL << 30), "20.0 GiB");
  EXPECT_EQ(FormatBytes(150754820096ULL), "140 GiB");
}

// Two sizes compared in one sentence never read alike when they differ (issue 23, item 4: "140 GiB
// free < 140 GiB").
TEST(Units, FormatBytesApartTellsCloseSizesApart) {
  EXPECT_EQ(FormatBytesApart(150106472448ULL, 140ULL << 30), std::make_pair(std::string("139.8 GiB"), std::string("140 GiB")));
  EXPECT_EQ(FormatBytesApart(1000ULL << 30, 150754820096ULL), std::make_pair(std::string("1000 GiB"), std::string("140 GiB")))
      << "as FormatBytes when that tells them apart";
  const auto close = FormatBytesApart((140ULL << 30) - (1ULL << 20), 140ULL << 30);  // 1 MiB apart
  EXPECT_EQ(close, std::make_pair(std::string("139.999 GiB"), std::string("140 GiB")));
  const auto bytes = FormatBytesApart((140ULL << 30) - 1, 140ULL << 30);
  EXPECT_EQ(bytes, std::make_pair(std::string("150323855359B"), std::string("150323855360B")));
  EXPECT_EQ(FormatBytesApart(5ULL << 30, 5ULL << 30), std::make_pair(std::string("5.0 GiB"), std::string("5.0 GiB")));
  EXPECT_EQ(FormatBytesApart(300ULL << 20, (300ULL << 20) + (1ULL << 19)).first, "300 MiB");
}

}  // namespace
}  // namespace gpulane
