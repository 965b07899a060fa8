// [shares] and the fair-share keys of [sched] as the config file gives them (util/config.h):
// defaults, values, and one-line errors naming the key and the fix.
#include <gtest/gtest.h>

#include "support/config_file.h"
#include "util/config.h"

namespace gpulane {
namespace {

class FairShareConfigFile : public test::ConfigFileTest {};

TEST_F(FairShareConfigFile, DefaultsAndValues) {
  Config defaults;
  ASSERT_TRUE(Load("", defaults).ok());
  EXPECT_EQ(defaults.fair_share_half_life_s, 86400);
  EXPECT_EQ(defaults.priority_weight_fair_share, 1.0);
  EXPECT_EQ(defaults.priority_weight_age, 1.0);
  EXPECT_EQ(defaults.priority_max_age_s, 7 * 86400);
  EXPECT_TRUE(defaults.shares.empty());
  Config c;
  ASSERT_TRUE(Load("[sched]\nfair_share_half_life = \"12h\"\npriority_weight_fair_share = 2\npriority_weight_age = 0.5\n"
                   "priority_max_age = 3600\n[shares]\nalice = 2\n\"@ml\" = 3.5\n",
                   c)
                  .ok());
  EXPECT_EQ(c.fair_share_half_life_s, 12 * 3600);
  EXPECT_EQ(c.priority_weight_fair_share, 2);
  EXPECT_EQ(c.priority_weight_age, 0.5);
  EXPECT_EQ(c.priority_max_age_s, 3600);
  EXPECT_EQ(c.shares, (std::map<std::string, double>{{"alice", 2}, {"@ml", 3.5}}));
}

TEST_F(FairShareConfigFile, ErrorsNameTheKeyAndTheFix) {
  EXPECT_NE(ErrorOf("[shares]\nalice = 0\n").find("shares.alice must be a number above 0"), std::string::npos);
  EXPECT_NE(ErrorOf("[shares]\nalice = \"two\"\n").find("shares.alice must be a number"), std::string::npos);
  EXPECT_NE(ErrorOf("[shares]\nalice = 2\n", false).find("shares.alice may only be set in /etc/gpulane/config.toml"),
            std::string::npos);
  EXPECT_NE(ErrorOf("[sched]\nfair_share_half_life = \"1s\"\n").find("sched.fair_share_half_life must be a duration from 1min"),
            std::string::npos);
  EXPECT_NE(ErrorOf("[sched]\nfair_share_half_life = \"soon\"\n").find("sched.fair_share_half_life:"), std::string::npos);
  EXPECT_NE(ErrorOf("[sched]\npriority_weight_age = -1\n").find("sched.priority_weight_age must be a number from 0"),
            std::string::npos);
  EXPECT_NE(ErrorOf("[sched]\nhalf_life = \"1d\"\n").find("unknown key sched.half_life (known: default_partition, policy, max_reserve_idle, max_unclaimed, max_preemptions_per_job, max_preemptions_per_minute, fair_share_half_life"),
            std::string::npos);
  EXPECT_NE(ErrorOf("[share]\nalice = 1\n").find("unknown section [share]: did you mean [shares]?"), std::string::npos);
  for (const std::string text : {"[shares]\nalice = 0\n", "[sched]\npriority_weight_age = -1\n"}) {
    const std::string e = ErrorOf(text);
    EXPECT_EQ(e.find('\n'), std::string::npos) << "one line: " << e;
    EXPECT_EQ(e.rfind(file_ + ":", 0), 0u) << "file:line first: " << e;
  }
}

}  // namespace
}  // namespace gpulane
