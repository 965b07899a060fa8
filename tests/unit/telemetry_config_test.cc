// [telemetry] in the config file (docs/config.md): `enabled = false` turns the sampler off, and a
// duration out of its range is refused in one line naming the range. Was
// DaemonTelemetry.ABadTelemetrySettingIsRefusedNamingTheRange through the binary (a daemon started
// for nothing: the CLI reads the file before it calls one); that a config error stops every command
// with exit 2 and its file and line stays there: Config.ABrokenFileStopsEveryCommandWithItsFileAndLine.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "util/config.h"

namespace gpulane {
namespace {

namespace fs = std::filesystem;

// The config file `text` loaded as a user's file (any file may set [telemetry]).
Result<Config> TelemetryLoad(const std::string& text) {
  const fs::path file = fs::temp_directory_path() / ("gpulane-telemetry-config-" + std::to_string(getpid()) + ".toml");
  std::ofstream(file) << text;
  Config config;
  Status loaded = LoadConfigFile(file.string(), /*trusted=*/false, config);
  fs::remove(file);
  if (!loaded.ok()) return loaded.error();
  return config;
}

TEST(TelemetryConfig, EnabledFalseTurnsTheSamplerOff) {
  EXPECT_TRUE(Config{}.telemetry_enabled) << "on by default";
  auto off = TelemetryLoad("[telemetry]\nenabled = false\n");
  ASSERT_TRUE(off) << off.error().message;
  EXPECT_FALSE(off->telemetry_enabled);
  auto word = TelemetryLoad("[telemetry]\nenabled = \"no\"\n");
  ASSERT_FALSE(word);
  EXPECT_NE(word.error().message.find("telemetry.enabled must be true or false"), std::string::npos) << word.error().message;
}

TEST(TelemetryConfig, AnIntervalOutOfItsRangeIsRefusedNamingTheRange) {
  for (const char* interval : {"1ms", "99ms", "61s"}) {
    auto bad = TelemetryLoad(std::string("[telemetry]\ninterval = \"") + interval + "\"\n");
    ASSERT_FALSE(bad) << interval;
    EXPECT_EQ(bad.error().kind, ErrorKind::kInvalidArgument);
    const std::string& message = bad.error().message;
    EXPECT_NE(message.find("telemetry.interval must be a duration from \"100ms\" to \"60s\""), std::string::npos) << message;
    EXPECT_NE(message.find(":2:"), std::string::npos) << "names the line: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  auto fine = TelemetryLoad("[telemetry]\ninterval = \"100ms\"\n");
  ASSERT_TRUE(fine) << fine.error().message;
  EXPECT_DOUBLE_EQ(fine->telemetry_interval_s, 0.1);
}

}  // namespace
}  // namespace gpulane
