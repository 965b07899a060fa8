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
  EXPECT_EQ(*ParseSizeBytes("1048576"), 1048576ULL);
  EXPECT_EQ(*ParseSizeBytes("1.5GiB"), 3ULL << 29);
  EXPECT_EQ(*ParseSizeBytes("2GB"), 2000000000ULL);
  EXPECT_EQ(*ParseSizeBytes("1T"), 1ULL << 40);
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
