// Partitions (sched/partition.h) on a virtual week: windows parsed, opening and closing (across
// midnight, over day ranges), the next change, the GPU restriction and limits, and the
// [partitions.NAME] tables of the config file.
#include <gtest/gtest.h>

#include "sched/partition.h"
#include "sched/policy.h"
#include "support/config_file.h"
#include "util/config.h"
#include "util/week_window.h"

namespace gpulane {
namespace {

// Local week time in seconds: day 0 = Monday.
double At(unsigned day, unsigned hour, unsigned minute = 0, unsigned second = 0) {
  return day * 86400.0 + hour * 3600.0 + minute * 60.0 + second;
}
constexpr unsigned kMon = 0, kTue = 1, kFri = 4, kSat = 5, kSun = 6;

PartitionConfig Partition(const std::string& name, std::vector<std::string> gpus, const std::vector<std::string>& windows) {
  PartitionConfig p;
  p.name = name;
  p.gpus = std::move(gpus);
  for (const auto& text : windows) {
    auto w = ParseWeekWindow(text);
    EXPECT_TRUE(w) << text << ": " << w.error().message;
    if (w) p.windows.push_back(*w);
  }
  return p;
}

TEST(WeekWindow, ParsesDaysAndHours) {
  auto w = ParseWeekWindow("Mon-Fri 08:00-20:00");
  ASSERT_TRUE(w) << w.error().message;
  EXPECT_EQ(w->first_day, 0u);
  EXPECT_EQ(w->last_day, 4u);
  EXPECT_EQ(w->start_min, 8u * 60);
  EXPECT_EQ(w->end_min, 20u * 60);
  auto every_day = ParseWeekWindow("20:00-08:00");
  ASSERT_TRUE(every_day);
  EXPECT_EQ(every_day->first_day, 0u);
  EXPECT_EQ(every_day->last_day, 6u);
  auto whole = ParseWeekWindow("sat 00:00-24:00");
  ASSERT_TRUE(whole) << whole.error().message;
  EXPECT_EQ(whole->first_day, 5u);
  EXPECT_EQ(whole->end_min, kMinutesPerDay);
}

TEST(WeekWindow, RefusesWhatItCannotReadNamingTheProblem) {
  struct Bad {
    std::string text, says;
  };
  for (const Bad& b : std::vector<Bad>{{"Mon-Fry 08:00-20:00", "unknown day 'Fry'"},
                                       {"Mon-Fri 8:00-20:00", "start '8:00'"},
                                       {"Mon-Fri 08:00-25:00", "end '25:00'"},
                                       {"Mon-Fri 08:00", "write it like"},
                                       {"Mon-Fri 08:60-20:00", "start '08:60'"},
                                       {"Mon 10:00-10:00", "same time"},
                                       {"", "write it like"}}) {
    auto w = ParseWeekWindow(b.text);
    ASSERT_FALSE(w) << b.text;
    EXPECT_NE(w.error().message.find(b.says), std::string::npos) << b.text << ": " << w.error().message;
  }
}

TEST(Partition, DayWindowOpensAndClosesOnWeekdaysOnly) {
  const PartitionConfig day = Partition("day", {"0", "1"}, {"Mon-Fri 08:00-20:00"});
  EXPECT_FALSE(sched::IsOpen(day, At(kMon, 7, 59, 59)));
  EXPECT_TRUE(sched::IsOpen(day, At(kMon, 8)));
  EXPECT_TRUE(sched::IsOpen(day, At(kFri, 19, 59, 59)));
  EXPECT_FALSE(sched::IsOpen(day, At(kFri, 20)));
  EXPECT_FALSE(sched::IsOpen(day, At(kSat, 12)));
  EXPECT_FALSE(sched::IsOpen(day, At(kSun, 12)));
  // Open: it next closes at 20:00 the same day.
  auto closes = sched::NextChange(day, At(kTue, 9, 30));
  ASSERT_TRUE(closes);
  EXPECT_FALSE(closes->opens);
  EXPECT_DOUBLE_EQ(closes->at_week_s, At(kTue, 20));
  EXPECT_DOUBLE_EQ(closes->in_s, 10.5 * 3600);
  // Closed on Friday night: it next opens on Monday at 08:00, across the end of the week.
  auto opens = sched::NextChange(day, At(kFri, 21));
  ASSERT_TRUE(opens);
  EXPECT_TRUE(opens->opens);
  EXPECT_DOUBLE_EQ(opens->at_week_s, At(kMon, 8));
  EXPECT_DOUBLE_EQ(opens->in_s, (24 * 2 + 11) * 3600.0);
  EXPECT_EQ(sched::ClosedText(day, At(kSat, 3)), "partition day is closed until 08:00 (Mon)");
}

TEST(Partition, WindowCrossingMidnightIsOpenUntilTheNextMorning) {
  const PartitionConfig night = Partition("night", {"0", "1", "2", "3"}, {"Mon-Fri 20:00-08:00"});
  EXPECT_TRUE(sched::IsOpen(night, At(kMon, 20)));
  EXPECT_TRUE(sched::IsOpen(night, At(kTue, 3)));  // Monday's window, after midnight
  EXPECT_FALSE(sched::IsOpen(night, At(kTue, 8)));
  EXPECT_TRUE(sched::IsOpen(night, At(kSat, 7, 59)));  // Friday's window runs into Saturday
  EXPECT_FALSE(sched::IsOpen(night, At(kSat, 20)));     // no Saturday window
  EXPECT_FALSE(sched::IsOpen(night, At(kMon, 7)));      // Sunday has none to run into Monday
  // Sunday's window wraps into the next week's Monday.
  const PartitionConfig sunday = Partition("sunday", {"0"}, {"Sun 22:00-02:00"});
  EXPECT_TRUE(sched::IsOpen(sunday, At(kMon, 1, 59)));
  EXPECT_FALSE(sched::IsOpen(sunday, At(kMon, 2)));
  auto closes = sched::NextChange(sunday, At(kSun, 23));
  ASSERT_TRUE(closes);
  EXPECT_FALSE(closes->opens);
  EXPECT_DOUBLE_EQ(closes->at_week_s, At(kMon, 2));
  EXPECT_DOUBLE_EQ(closes->in_s, 3 * 3600.0);
}

TEST(Partition, DayRangeThatWrapsAndOverlappingWindowsJoin) {
  const PartitionConfig weekend = Partition("weekend", {"0"}, {"Fri-Mon 00:00-24:00", "Tue 10:00-12:00", "Tue 11:00-13:00"});
  for (unsigned d : {kFri, kSat, kSun, kMon}) EXPECT_TRUE(sched::IsOpen(weekend, At(d, 12))) << d;
  EXPECT_FALSE(sched::IsOpen(weekend, At(kTue, 9)));
  EXPECT_TRUE(sched::IsOpen(weekend, At(kTue, 12, 30)));
  auto closes = sched::NextChange(weekend, At(kTue, 10, 15));
  ASSERT_TRUE(closes);
  EXPECT_DOUBLE_EQ(closes->at_week_s, At(kTue, 13)) << "the two Tuesday windows are one opening";
  // Mon-Sun 20:00-08:00 and Mon-Sun 08:00-20:00 together cover the week: it never changes.
  const PartitionConfig always = Partition("always", {"0"}, {"Mon-Sun 20:00-08:00", "08:00-20:00"});
  EXPECT_TRUE(sched::IsOpen(always, At(kSun, 23, 59, 59)));
  EXPECT_FALSE(sched::NextChange(always, At(kMon, 0)));
  const PartitionConfig none = Partition("all", {"0", "1"}, {});
  EXPECT_TRUE(sched::IsOpen(none, At(kSat, 3)));
  EXPECT_FALSE(sched::NextChange(none, At(kSat, 3)));
}

// A job waiting on a virtual clock: the window opens and closes as the clock advances, with the
// change times NextChange announced.
TEST(Partition, FollowingTheChangesOnAVirtualClockVisitsEachEdgeOnce) {
  const PartitionConfig day = Partition("day", {"0", "1"}, {"Mon-Fri 08:00-20:00"});
  double t = At(kSun, 12);
  std::vector<std::pair<bool, double>> seen;
  for (int i = 0; i < 4; ++i) {
    auto change = sched::NextChange(day, t);
    ASSERT_TRUE(change);
    EXPECT_GT(change->in_s, 0);
    EXPECT_NE(sched::IsOpen(day, t), change->opens);
    t += change->in_s;
    EXPECT_EQ(sched::IsOpen(day, t), change->opens) << "open just as announced";
    EXPECT_EQ(sched::IsOpen(day, t - 1), !change->opens) << "and not a second earlier";
    seen.push_back({change->opens, t});
  }
  EXPECT_DOUBLE_EQ(seen[0].second, At(kSun, 12) + 20 * 3600.0);  // Monday 08:00 of the next week
  EXPECT_DOUBLE_EQ(seen[1].second, seen[0].second + 12 * 3600.0);  // closes at 20:00
  EXPECT_DOUBLE_EQ(seen[2].second, seen[1].second + 12 * 3600.0);  // Tuesday 08:00
  EXPECT_TRUE(seen[0].first);
  EXPECT_FALSE(seen[1].first);
}

// ends = "stop"|"requeue": a job started in an open partition is stopped when it next closes, on
// a virtual week (a window opening and closing mid-job, across midnight); never with "none", no
// windows, a partition open all week, or one closed at the start (nothing starts then).
TEST(Partition, AJobStartedInAPartitionThatEndsIsStoppedWhenItCloses) {
  PartitionConfig night = Partition("night", {"0"}, {"Mon-Sun 20:00-08:00"});
  EXPECT_FALSE(sched::StopOf(night, At(kMon, 21))) << "ends = none: its jobs run on";
  night.ends = PartitionEnds::kRequeue;
  auto stop = sched::StopOf(night, At(kMon, 21, 30));
  ASSERT_TRUE(stop);
  EXPECT_DOUBLE_EQ(stop->in_s, 10.5 * 3600) << "from Mon 21:30 to Tue 08:00";
  EXPECT_TRUE(stop->requeue);
  EXPECT_EQ(stop->reason, "partition night closed at 08:00 (Tue) (ends = \"requeue\")");
  stop = sched::StopOf(night, At(kSun, 7, 59, 30));
  ASSERT_TRUE(stop);
  EXPECT_DOUBLE_EQ(stop->in_s, 30) << "Sunday's night ends Sunday 08:00";
  EXPECT_FALSE(sched::StopOf(night, At(kTue, 12))) << "closed: nothing starts in it";
  PartitionConfig day = Partition("day", {"0"}, {"Mon-Fri 08:00-20:00"});
  day.ends = PartitionEnds::kStop;
  stop = sched::StopOf(day, At(kFri, 19, 0, 1));
  ASSERT_TRUE(stop);
  EXPECT_DOUBLE_EQ(stop->in_s, 3599);
  EXPECT_FALSE(stop->requeue);
  EXPECT_EQ(stop->reason, "partition day closed at 20:00 (Fri) (ends = \"stop\")");
  PartitionConfig always = Partition("always", {"0"}, {});
  always.ends = PartitionEnds::kStop;
  EXPECT_FALSE(sched::StopOf(always, At(kMon, 9))) << "no windows: never closes";
  PartitionConfig whole = Partition("whole", {"0"}, {"Mon-Sun 00:00-24:00"});
  whole.ends = PartitionEnds::kStop;
  EXPECT_FALSE(sched::StopOf(whole, At(kSat, 9))) << "open all week: never closes";
}

TEST(Partition, StatusLines) {
  const PartitionConfig day = Partition("day", {"0", "1"}, {"Mon-Fri 08:00-20:00"});
  EXPECT_EQ(sched::StatusLine(day, At(kTue, 9)), "partition day (GPUs 0-1): open until 20:00");
  EXPECT_EQ(sched::StatusLine(day, At(kSat, 9)), "partition day (GPUs 0-1): closed, opens Mon 08:00");
  const PartitionConfig week = Partition("week", {"0", "2", "3"}, {"Mon 00:00-24:00", "Tue 00:00-24:00"});
  EXPECT_EQ(sched::StatusLine(week, At(kMon, 9)), "partition week (GPUs 0,2-3): open until Wed 00:00");
  EXPECT_EQ(sched::StatusLine(Partition("all", {"GPU-a"}, {}), At(kMon, 0)), "partition all (GPUs GPU-a): open, no time windows");
}

TEST(Partition, RestrictsTheRequestToItsGpusWithinWhatItAllows) {
  const PartitionConfig day = Partition("day", {"0", "GPU-c"}, {});
  const std::vector<std::string> uuids = {"GPU-a", "GPU-b", "GPU-c", "GPU-d"};
  sched::Request any;
  ASSERT_TRUE(sched::RestrictToPartition(day, any, uuids).ok());
  EXPECT_EQ(any.allowed_uuids, (std::vector<std::string>{"GPU-a", "GPU-c"}));
  sched::Request narrowed;
  narrowed.allowed_uuids = std::vector<std::string>{"GPU-c", "GPU-d"};
  ASSERT_TRUE(sched::RestrictToPartition(day, narrowed, uuids).ok());
  EXPECT_EQ(narrowed.allowed_uuids, (std::vector<std::string>{"GPU-c"})) << "--gpus and the partition both apply";
  sched::Request r;
  Status missing = sched::RestrictToPartition(Partition("x", {"4"}, {}), r, uuids);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("GPU 4 is not on this machine"), std::string::npos) << missing.error().message;
}

TEST(Partition, LimitsRefuseOrFillInTheRequest) {
  PartitionConfig day = Partition("day", {"0", "1"}, {});
  day.max_gpus_per_user = 2;
  day.max_time_limit_s = 12 * 3600;
  sched::Request three;
  three.count = 3;
  Status s = sched::ApplyPartition(day, three, std::nullopt);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, "-g 3: partition day allows at most 2 GPUs per user: ask for fewer");
  sched::Request no_limit;
  ASSERT_TRUE(sched::ApplyPartition(day, no_limit, std::nullopt).ok());
  EXPECT_EQ(no_limit.time_limit_s, 12 * 3600.0) << "a job without --time-limit gets the partition's maximum";
  sched::Request too_long;
  too_long.time_limit_s = 13 * 3600;
  ASSERT_FALSE(sched::ApplyPartition(day, too_long, std::nullopt).ok());
}

TEST(Partition, SelectByNameOrDefaultAndListTheKnownOnes) {
  Config config;
  config.partitions = {Partition("day", {"0"}, {}), Partition("night", {"1"}, {})};
  auto none = sched::SelectPartition(config, "");
  ASSERT_TRUE(none);
  EXPECT_EQ(*none, nullptr);
  config.default_partition = "night";
  auto by_default = sched::SelectPartition(config, "");
  ASSERT_TRUE(by_default && *by_default);
  EXPECT_EQ((*by_default)->name, "night");
  auto unknown = sched::SelectPartition(config, "nigth");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().message, "--partition nigth: no such partition (known: day, night)");
}

TEST(Partition, ClosedPartitionRefusesWhatMustStartNow) {
  const PartitionConfig day = Partition("day", {"0"}, {"Mon-Fri 08:00-20:00"});
  EXPECT_TRUE(sched::RequireOpen(day, At(kMon, 9)).ok());
  Status closed = sched::RequireOpen(day, At(kMon, 21));
  ASSERT_FALSE(closed.ok());
  EXPECT_EQ(closed.error().kind, ErrorKind::kNotEnoughGpus);
  EXPECT_EQ(closed.error().message, "partition day is closed until 08:00 (Tue)");
}

// The [partitions.NAME] tables as the config file gives them.
class PartitionConfigFile : public test::ConfigFileTest {};

TEST_F(PartitionConfigFile, TheDayAndNightExample) {
  Config config;
  Status s = Load(
      "[partitions.day]\ngpus = [0, 1]\nwindows = [\"Mon-Fri 08:00-20:00\"]\nmax_time_limit = \"12h\"\nmax_gpus_per_user = 2\n"
      "[partitions.night]\ngpus = [0, 1, 2, \"GPU-x\"]\nwindows = [\"Mon-Sun 20:00-08:00\"]\n"
      "[sched]\ndefault_partition = \"day\"\n",
      config);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_EQ(config.partitions.size(), 2u);
  EXPECT_EQ(config.partitions[0].name, "day");
  EXPECT_EQ(config.partitions[0].gpus, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(config.partitions[0].max_time_limit_s, 12 * 3600.0);
  EXPECT_EQ(config.partitions[0].max_gpus_per_user, 2u);
  EXPECT_EQ(config.partitions[1].gpus, (std::vector<std::string>{"0", "1", "2", "GPU-x"}));
  ASSERT_EQ(config.partitions[1].windows.size(), 1u);
  EXPECT_EQ(config.default_partition, "day");
  EXPECT_EQ(config.partitions[0].ends, PartitionEnds::kNone) << "the default: its jobs run on";
  for (auto [text, ends] : {std::pair{"none", PartitionEnds::kNone}, std::pair{"stop", PartitionEnds::kStop},
                            std::pair{"requeue", PartitionEnds::kRequeue}}) {
    Config with;
    Status loaded = Load(std::string("[partitions.night]\ngpus = [0]\nends = \"") + text + "\"\n", with);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    EXPECT_EQ(with.partitions[0].ends, ends) << text;
  }
}

// [sched] policy and max_reserve_idle: every name sched::ParsePolicy knows, and only those (the
// config cannot include sched/, so it keeps its own list: this checks the two agree).
TEST_F(PartitionConfigFile, SchedPolicyAndMaxReserveIdle) {
  Config defaults;
  EXPECT_EQ(defaults.sched_policy, "default");
  EXPECT_EQ(defaults.max_reserve_idle_s, sched::kDefaultMaxReserveIdleS);
  for (const char* name : kSchedPolicyNames) {
    auto policy = sched::ParsePolicy(name);
    ASSERT_TRUE(policy) << name;
    EXPECT_STREQ(sched::PolicyName(*policy), name);
  }
  for (sched::PolicyKind kind : {sched::PolicyKind::kDefault, sched::PolicyKind::kEasy, sched::PolicyKind::kFifo,
                                 sched::PolicyKind::kFirstFit}) {
    Config config;
    Status s = Load(std::string("[sched]\npolicy = \"") + sched::PolicyName(kind) + "\"\nmax_reserve_idle = \"2m\"\n", config);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(config.sched_policy, sched::PolicyName(kind));
    EXPECT_EQ(config.max_reserve_idle_s, 120.0);
  }
  Config config;
  Status user = Load("[sched]\npolicy = \"fifo\"\n", config, /*trusted=*/false);
  ASSERT_FALSE(user.ok()) << "a user cannot choose the machine's policy";
}

TEST_F(PartitionConfigFile, MistakesAreOneLineNamingTheKeyAndLine) {
  struct Bad {
    std::string text;
    int line;
    std::string says;
  };
  const std::vector<Bad> bad = {
      {"[partitions.day]\ngpus = [0]\nwindow = [\"08:00-20:00\"]\n", 3, "unknown key partitions.day.window"},
      {"[partitions.day]\ngpus = [0]\nwindows = [\"Mon-Fry 08:00-20:00\"]\n", 3, "partitions.day.windows: 'Mon-Fry 08:00-20:00': unknown day 'Fry'"},
      {"[partitions.day]\nwindows = [\"08:00-20:00\"]\n", 1, "partitions.day needs gpus"},
      {"[partitions.day]\ngpus = [-1]\n", 2, "a GPU index is 0 or more"},
      {"[partitions.day]\ngpus = [0]\nmax_time_limit = \"soon\"\n", 3, "partitions.day.max_time_limit must be a positive duration"},
      {"[partitions.day]\ngpus = [0]\nmax_gpus_per_user = 0\n", 3, "partitions.day.max_gpus_per_user must be an integer from 1 to 1024"},
      {"[partitions.day]\ngpus = [0]\n[sched]\ndefault_partition = \"night\"\n", 4, "no [partitions.night] table"},
      {"[sched]\nbackfill = true\n", 2, "unknown key sched.backfill"},
      {"[sched]\npolicy = \"slurm\"\n", 2, "sched.policy must be \"default\", \"easy\", \"fifo\" or \"firstfit\""},
      {"[sched]\nmax_reserve_idle = \"2d\"\n", 2, "sched.max_reserve_idle must be a duration from \"0s\" to \"1d\""},
      {"[sched]\nmax_reserve_idle = 600\n", 2, "sched.max_reserve_idle must be a duration"},
      {"[partitions.day]\ngpus = [0]\nends = \"kill\"\n", 3, "partitions.day.ends must be \"none\", \"stop\" or \"requeue\""},
  };
  for (const Bad& b : bad) {
    Config config;
    Status s = Load(b.text, config);
    ASSERT_FALSE(s.ok()) << b.text;
    EXPECT_NE(s.error().message.find(file_ + ":" + std::to_string(b.line) + ": "), std::string::npos) << s.error().message;
    EXPECT_NE(s.error().message.find(b.says), std::string::npos) << s.error().message;
    EXPECT_EQ(s.error().message.find('\n'), std::string::npos);
  }
  Config config;
  Status user = Load("[partitions.day]\ngpus = [0]\n", config, /*trusted=*/false);
  ASSERT_FALSE(user.ok());
  EXPECT_NE(user.error().message.find("may only be set in /etc/gpulane/config.toml"), std::string::npos);
}

}  // namespace
}  // namespace gpulane
