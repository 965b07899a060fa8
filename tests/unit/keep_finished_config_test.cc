// daemon.keep_finished (docs/config.md "Retention"): how long finished jobs stay in the job store.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "util/config.h"

namespace gpulane {
namespace {

namespace fs = std::filesystem;

// The config file `text` loaded as the machine's (trusted) or a user's file.
Result<Config> Load(const std::string& text, bool trusted = true) {
  const fs::path file = fs::temp_directory_path() / ("gpulane-keep-finished-" + std::to_string(getpid()) + ".toml");
  std::ofstream(file) << text;
  Config config;
  Status loaded = LoadConfigFile(file.string(), trusted, config);
  fs::remove(file);
  if (!loaded.ok()) return loaded.error();
  return config;
}

TEST(KeepFinishedConfig, DefaultsToThirtyDaysAndTakesDurationsOrForever) {
  EXPECT_EQ(Config{}.daemon_keep_finished_s, 30 * 86400);
  auto two = Load("[daemon]\nkeep_finished = \"2s\"\n");
  ASSERT_TRUE(two) << two.error().message;
  EXPECT_EQ(two->daemon_keep_finished_s, 2);
  auto week = Load("[daemon]\nkeep_finished = \"7d\"\n");
  ASSERT_TRUE(week);
  EXPECT_EQ(week->daemon_keep_finished_s, 7 * 86400);
  auto forever = Load("[daemon]\nkeep_finished = \"forever\"\n");
  ASSERT_TRUE(forever);
  EXPECT_EQ(forever->daemon_keep_finished_s, 0) << "0: never removed";
}

TEST(KeepFinishedConfig, OutOfRangeOrUnreadableValuesAreOneClearError) {
  for (const char* bad : {"\"0.5s\"", "\"3651d\"", "\"soon\"", "30", "\"-1d\""}) {
    auto loaded = Load(std::string("[daemon]\nkeep_finished = ") + bad + "\n");
    ASSERT_FALSE(loaded) << bad;
    EXPECT_NE(loaded.error().message.find("daemon.keep_finished must be a duration from \"1s\" to \"3650d\", or \"forever\""),
              std::string::npos)
        << loaded.error().message;
  }
  auto user = Load("[daemon]\nkeep_finished = \"1d\"\n", /*trusted=*/false);
  ASSERT_FALSE(user);
  EXPECT_NE(user.error().message.find("may only be set in /etc/gpulane/config.toml"), std::string::npos);
}

}  // namespace
}  // namespace gpulane
