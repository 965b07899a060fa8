// history.db must never take the room jobs.db needs (issue 23, item 8): the floor of free space
// under which the sampler stores no history, and the bound on what a usage record keeps of a
// lease's label (history stores no command lines).
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "daemon/history_room.h"
#include "daemon/sampler.h"
#include "util/config.h"
#include "support/units.h"

namespace gpulane::daemon {
namespace {

TEST(HistoryRoom, TheFloorIs256MiBOrTwoPercentOfTheFileSystem) {
  EXPECT_EQ(HistoryFloorBytes(0), 256 * kMiB);
  EXPECT_EQ(HistoryFloorBytes(10 * kGiB), 256 * kMiB) << "2 % of 10 GiB is under 256 MiB";
  EXPECT_EQ(HistoryFloorBytes(100 * kGiB), 2 * kGiB);
}

TEST(HistoryRoom, HistoryStopsUnderTheFloorAndResumesAtIt) {
  EXPECT_FALSE(HistoryHasRoom({255 * kMiB, 10 * kGiB}));
  EXPECT_TRUE(HistoryHasRoom({256 * kMiB, 10 * kGiB}));
  EXPECT_FALSE(HistoryHasRoom({1 * kGiB, 100 * kGiB})) << "1 GiB free of 100 GiB: under 2 %";
  EXPECT_TRUE(HistoryHasRoom({3 * kGiB, 100 * kGiB}));
}

TEST(HistoryRoom, TheWarningNamesTheFolderAndBothSizes) {
  const std::string line = NoRoomLine("/var/lib/gpulane", {120 * kMiB, 10 * kGiB});
  EXPECT_NE(line.find("GPU history is not stored"), std::string::npos) << line;
  EXPECT_NE(line.find("/var/lib/gpulane"), std::string::npos) << line;
  EXPECT_NE(line.find("120 MiB free"), std::string::npos) << line;
  EXPECT_NE(line.find("256 MiB"), std::string::npos) << line;
}

// daemon.history_min_free: the admin's floor, a size or a percentage of the file system.
TEST(HistoryRoom, TheAdminsFloorIsASizeOrAPercentage) {
  const HistoryFloor one_gib{1 * kGiB, std::nullopt}, five_pct{std::nullopt, 5.0}, none{0, std::nullopt};
  EXPECT_EQ(HistoryFloorBytes(100 * kGiB, one_gib), 1 * kGiB);
  EXPECT_EQ(HistoryFloorBytes(100 * kGiB, five_pct), 5 * kGiB);
  EXPECT_FALSE(HistoryHasRoom({4 * kGiB, 100 * kGiB}, five_pct));
  EXPECT_TRUE(HistoryHasRoom({5 * kGiB, 100 * kGiB}, five_pct));
  EXPECT_TRUE(HistoryHasRoom({100 * kMiB, 10 * kGiB}, none)) << "0: history always stored";
  EXPECT_FALSE(HistoryHasRoom({99 * kGiB, 100 * kGiB}, {std::nullopt, 100.0})) << "100 %: never";
  const std::string line = NoRoomLine("/var/lib/gpulane", {4 * kGiB, 100 * kGiB}, five_pct);
  EXPECT_NE(line.find("under the 5.0 GiB kept for the job store (daemon.history_min_free, 5 % of its file system)"),
            std::string::npos)
      << line;
}

// The config file `text` loaded as the machine's (trusted) or a user's file.
Result<Config> LoadConfigText(const std::string& text, bool trusted = true) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("gpulane-history-min-free-" + std::to_string(getpid()) + ".toml");
  std::ofstream(file) << text;
  Config config;
  Status loaded = LoadConfigFile(file.string(), trusted, config);
  std::filesystem::remove(file);
  if (!loaded.ok()) return loaded.error();
  return config;
}

TEST(HistoryRoom, HistoryMinFreeIsReadFromTheMachinesConfig) {
  EXPECT_FALSE(Config{}.daemon_history_min_free_bytes);
  EXPECT_FALSE(Config{}.daemon_history_min_free_pct);
  auto size = LoadConfigText("[daemon]\nhistory_min_free = \"10GiB\"\n");
  ASSERT_TRUE(size) << size.error().message;
  EXPECT_EQ(size->daemon_history_min_free_bytes, 10 * kGiB);
  auto pct = LoadConfigText("[daemon]\nhistory_min_free = \"2.5%\"\n");
  ASSERT_TRUE(pct) << pct.error().message;
  EXPECT_EQ(pct->daemon_history_min_free_pct, 2.5);
  EXPECT_FALSE(pct->daemon_history_min_free_bytes);
  auto zero = LoadConfigText("[daemon]\nhistory_min_free = \"0\"\n");
  ASSERT_TRUE(zero) << zero.error().message;
  EXPECT_EQ(zero->daemon_history_min_free_bytes, 0u);
  for (const char* bad : {"\"101%\"", "\"-1%\"", "\"%\"", "\"lots\"", "\"30\"", "256", "true"}) {
    auto loaded = LoadConfigText(std::string("[daemon]\nhistory_min_free = ") + bad + "\n");
    ASSERT_FALSE(loaded) << bad;
    EXPECT_NE(loaded.error().message.find("daemon.history_min_free must be a size"), std::string::npos)
        << loaded.error().message;
  }
  auto user = LoadConfigText("[daemon]\nhistory_min_free = \"1GiB\"\n", /*trusted=*/false);
  ASSERT_FALSE(user);
  EXPECT_NE(user.error().message.find("may only be set in /etc/gpulane/config.toml"), std::string::npos);
}

TEST(HistoryRoom, DiskSpaceOfAFolderIsRead) {
  auto space = DiskSpaceOf("/");
  ASSERT_TRUE(space) << space.error().message;
  EXPECT_GT(space->total_bytes, 0u);
  EXPECT_LE(space->free_bytes, space->total_bytes);
  EXPECT_FALSE(DiskSpaceOf("/nonexistent/gpulane"));
}

// A lease file written by hand may hold a label of up to 1 MiB: the usage record stores at most
// kMaxLeaseLabelBytes of it, once per job (never a command line, never per sample).
TEST(HistoryRoom, AHandWrittenLeasesHugeLabelIsStoredBounded) {
  SamplerSettings settings;
  settings.anomaly.idle_after_s = 1e9;
  Sampler sampler(settings);
  GpuSnapshot snapshot;
  GpuDevice d;
  d.uuid = "GPU-0";
  d.memory_total_bytes = 100 * kGiB;
  d.processes.emplace();
  snapshot.devices.push_back(d);
  lease::LeaseRecord l;
  l.name = "lease-a";
  l.job_id = "12";
  l.user = "mallory";
  l.label = std::string(1 << 20, 'A');
  l.gpus = {{"GPU-0", std::nullopt}};
  l.started_s = 1000;
  sampler.Take(1000, snapshot, {l}, {{}});
  auto out = sampler.Take(1010, snapshot, {}, {{}});
  ASSERT_EQ(out.finished.size(), 1u);
  EXPECT_LE(out.finished[0].name.size(), lease::kMaxLeaseLabelBytes);
}

}  // namespace
}  // namespace gpulane::daemon
