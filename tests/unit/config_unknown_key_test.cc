// A misspelt key or section of a config file: the error line names the nearest known one ("did you
// mean daemon.max_waiting?"), else lists the section's keys (util/did_you_mean.h UnknownKeyMessage,
// called by every table's reader in util/config*.cc and util/web_config.cc).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "support/config_file.h"
#include "util/did_you_mean.h"
#include "util/strings.h"

namespace gpulane {
namespace {

class UnknownConfigKey : public test::ConfigFileTest {
 protected:
  // The keys an error line lists after "(known: ", "" parts dropped; empty when it lists none.
  static std::vector<std::string> ListedKeys(const std::string& error) {
    const std::size_t from = error.find("(known: ");
    if (from == std::string::npos) return {};
    const std::size_t to = error.find(')', from);
    std::vector<std::string> keys;
    for (const std::string& k : Split(error.substr(from + 8, to - from - 8), ','))
      if (!Trim(k).empty()) keys.emplace_back(Trim(k));
    return keys;
  }
};

// The first thing a new user met: `max_waitng = 3` under [daemon] said only "unknown key".
TEST_F(UnknownConfigKey, AMisspeltKeyNamesTheNearestOneInEverySection) {
  struct Case {
    std::string text, typed, meant;
  };
  for (const Case& c : std::vector<Case>{
           {"[daemon]\nmax_waitng = 3\n", "daemon.max_waitng", "daemon.max_waiting"},
           {"[run]\nkill_grase = \"5s\"\n", "run.kill_grase", "run.kill_grace"},
           {"[lease]\nmemory_margn = \"1GiB\"\n", "lease.memory_margn", "lease.memory_margin"},
           {"[sched]\npolcy = \"easy\"\n", "sched.polcy", "sched.policy"},
           {"[web]\nlistn = \"off\"\n", "web.listn", "web.listen"},
           {"[notify]\nwebhok = \"http://x/\"\n", "notify.webhok", "notify.webhook"},
           {"[telemetry]\nintervall = \"1s\"\n", "telemetry.intervall", "telemetry.interval"},
           {"[anomaly]\nidle_utl = 5\n", "anomaly.idle_utl", "anomaly.idle_util"},
           {"[slurm]\npoll_intervall = \"5s\"\n", "slurm.poll_intervall", "slurm.poll_interval"},
           {"[submit]\nbackend_ = \"slurm\"\n", "submit.backend_", "submit.backend"},
           {"[partitions.day]\nwindow = [\"Mon-Fri 08:00-20:00\"]\n", "partitions.day.window", "partitions.day.windows"},
           {"[limits]\nuser = 1\n", "limits.user", "limits.users"},
           {"[limits.users.bob]\nmax_gpu = 1\n", "limits.users.bob.max_gpu", "limits.users.bob.max_gpus"},
       }) {
    EXPECT_EQ(ErrorOf(c.text), fmt::format("{}:2: unknown key {}: did you mean {}? (see docs/config.md)", file_, c.typed, c.meant))
        << c.text;
  }
}

// The new user's own file (not the machine's): a misspelt machine-only key is still said as
// misspelt, not as a key the user may not set.
TEST_F(UnknownConfigKey, AUsersFileHearsOfTheMisspellingFirst) {
  EXPECT_EQ(ErrorOf("[daemon]\nmax_waitng = 3\n", false),
            file_ + ":2: unknown key daemon.max_waitng: did you mean daemon.max_waiting? (see docs/config.md)");
  EXPECT_EQ(ErrorOf("[sched]\npolcy = \"easy\"\n", false), file_ + ":2: unknown key sched.polcy: did you mean sched.policy? (see docs/config.md)");
  EXPECT_NE(ErrorOf("[daemon]\nmax_waiting = 3\n", false).find("daemon.max_waiting may only be set in /etc/gpulane/config.toml"),
            std::string::npos);
  EXPECT_NE(ErrorOf("[sched]\npolicy = \"easy\"\n", false).find("sched.policy may only be set in /etc/gpulane/config.toml"),
            std::string::npos);
}

TEST_F(UnknownConfigKey, AKeyNearNoneListsTheSectionsKeys) {
  EXPECT_EQ(ErrorOf("[daemon]\ncolour = 3\n"),
            file_ + ":2: unknown key daemon.colour (known: admin_group, max_waiting, show_commands, mode, keep_finished, "
                    "history_min_free) (see docs/config.md)");
  EXPECT_EQ(ErrorOf("[run]\ncolour = 3\n"),
            file_ + ":2: unknown key run.colour (known: isolate, isolate_required, kill_grace, nvml_poll, stray_check) (see docs/config.md)");
  EXPECT_EQ(ErrorOf("[lease]\ncolour = 3\n"), file_ + ":2: unknown key lease.colour (known: dir, memory_margin) (see docs/config.md)");
  EXPECT_NE(ErrorOf("[limits]\ncolour = 3\n").find("max_gpu_hours_per_day, users.NAME, groups.NAME)"), std::string::npos);
}

// Every key a section's error lists is one its reader takes (a list beside the reader that went
// stale would send the user to a key that is refused again).
TEST_F(UnknownConfigKey, EveryListedKeyIsRead) {
  for (const std::string section : {"daemon", "run", "lease", "sched", "web", "notify", "telemetry", "anomaly", "slurm", "submit",
                                    "limits", "limits.users.bob", "partitions.day"}) {
    const std::vector<std::string> keys = ListedKeys(ErrorOf(fmt::format("[{}]\nzzzzzz = 1\n", section)));
    EXPECT_GE(keys.size(), 1u) << section;
    for (std::string key : keys) {
      if (const std::size_t dot = key.find(".NAME"); dot != std::string::npos) key.resize(dot);
      const std::string error = ErrorOf(fmt::format("[{}]\n{} = \"x?\"\n", section, key));
      EXPECT_EQ(error.find("unknown key"), std::string::npos) << section << "." << key << ": " << error;
    }
  }
}

TEST_F(UnknownConfigKey, AMisspeltSectionNamesTheNearestOne) {
  EXPECT_EQ(ErrorOf("[deamon]\nmax_waiting = 3\n"), file_ + ":1: unknown section [deamon]: did you mean [daemon]? (see docs/config.md)");
  EXPECT_EQ(ErrorOf("[share]\nalice = 2\n"), file_ + ":1: unknown section [share]: did you mean [shares]? (see docs/config.md)");
  EXPECT_NE(ErrorOf("[partition.day]\ngpus = [0]\n").find("unknown section [partition]: did you mean [partitions]?"), std::string::npos);
  const std::string far = ErrorOf("[colour]\nx = 1\n");
  EXPECT_NE(far.find("unknown section [colour] (the sections are [lease], [run], [daemon], "), std::string::npos) << far;
  EXPECT_NE(far.find("[slurm], [partitions.NAME])"), std::string::npos) << far;
  // A key above every section (its header forgotten) is no section: said as a key.
  const std::string bare = ErrorOf("max_waiting = 3\n");
  EXPECT_EQ(bare.rfind(file_ + ":1: unknown key max_waiting (the sections are [lease], ", 0), 0u) << bare;
}

TEST(UnknownKeyMessage, SuggestsTheNearestKnownKeyElseListsThem) {
  const std::vector<std::string> known = {"max_gpus", "max_queued", "users.NAME"};
  EXPECT_EQ(UnknownKeyMessage("limits", "max_gpu", known), "unknown key limits.max_gpu: did you mean limits.max_gpus?");
  EXPECT_EQ(UnknownKeyMessage("limits", "user", known), "unknown key limits.user: did you mean limits.users?");
  EXPECT_EQ(UnknownKeyMessage("limits", "colour", known), "unknown key limits.colour (known: max_gpus, max_queued, users.NAME)");
  EXPECT_EQ(UnknownSectionMessage("limit", {"daemon", "limits"}), "unknown section [limit]: did you mean [limits]?");
  EXPECT_EQ(UnknownSectionMessage("colour", {"daemon", "limits"}), "unknown section [colour] (the sections are [daemon], [limits])");
}

}  // namespace
}  // namespace gpulane
