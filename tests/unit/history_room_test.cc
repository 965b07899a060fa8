// history.db must never take the room jobs.db needs (issue 23, item 8): the floor of free space
// under which the sampler stores no history, and the bound on what a usage record keeps of a
// lease's label (history stores no command lines).
#include <gtest/gtest.h>

#include "daemon/history_room.h"
#include "daemon/sampler.h"

namespace gpulane::daemon {
namespace {

constexpr std::uint64_t kMiB = 1ULL << 20, kGiB = 1ULL << 30;

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
