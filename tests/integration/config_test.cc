// The config file (docs/config.md) as every command sees it: a broken file stops each command with
// its file and line (exit 2), and run.kill_grace applies to queued jobs as it does to `gpulane run`.
#include <gtest/gtest.h>

#include <filesystem>
#include <fmt/format.h>
#include <fstream>

#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct BrokenConfig {
  std::string text;
  int line;           ///< the line the error must name
  std::string says;   ///< and a word of the problem
};

TEST(Config, ABrokenFileStopsEveryCommandWithItsFileAndLine) {
  TestDaemon d({.start = false});  // nothing may need a daemon: the file is read before anything else
  const fs::path file = d.dir() / "config.toml";
  const std::vector<BrokenConfig> broken = {
      {"[run]\nkill_grace = \"10s\n", 2, ""},                         // unparsable: unterminated string
      {"[run]\nkill_grace = \"10s\"\nkill_grase = \"5s\"\n", 3, "run.kill_grase"},  // unknown key
      {"[run]\n\nnvml_poll = [1, 2]\n", 3, "run.nvml_poll"},         // wrong type
      {"[lease]\nmemory_margin = \"1GiB\"\n[jobs]\nx = 1\n", 3, "jobs"},  // unknown section
      {"[run]\nnvml_poll = 0\n", 2, "run.nvml_poll = 0s is out of range"},  // a waiter would spin
      {"[run]\nstray_check = \"1ms\"\n", 2, "run.stray_check"},               // too often
      {"[run]\nkill_grace = \"2d\"\n", 2, "run.kill_grace"},                  // a cancel that never ends
  };
  const std::vector<std::vector<std::string>> commands = {
      {"status"}, {"pick"}, {"queue"}, {"submit", "--", "true"}, {"show", "1"}, {"cancel", "1"}, {"run", "--", "true"},
  };
  for (const auto& config : broken) {
    std::ofstream(file, std::ios::trunc) << config.text;
    for (const auto& args : commands) {
      SCOPED_TRACE(config.text + " | " + ::testing::PrintToString(args));
      RunResult r = d.Gpulane(args);
      EXPECT_TRUE(IsGpulaneError(r, 2, fmt::format("{}:{}: ", file.string(), config.line)));
      EXPECT_TRUE(Contains(r.err, config.says)) << r.err;
    }
  }
  EXPECT_FALSE(fs::exists(d.socket())) << "no command went on to start a daemon";
  // Help still works, and the same commands run once the file is mended.
  EXPECT_EQ(d.Gpulane({"status", "--help"}).exit_code, 0);
  std::ofstream(file, std::ios::trunc) << "[run]\nkill_grace = \"10s\"\n";
  RunResult status = d.Gpulane({"status"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
}

// A file named by GPULANE_CONFIG that is not there is an error naming the variable and the path
// (the user asked for its settings: silently running without them hid the typo), exit 2 as for a
// broken file; the default file (~/.config/gpulane/config.toml) may be missing.
TEST(Config, AMissingFileNamedByGpulaneConfigIsAnErrorTheDefaultOneIsNot) {
  TestDaemon d({.start = false});
  const fs::path missing = d.dir() / "nonexist.toml";
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{{"pick"}, {"status"}, {"queue"}}) {
    SCOPED_TRACE(::testing::PrintToString(args));
    RunResult r = d.Gpulane(args, {{"GPULANE_CONFIG", missing.string()}});
    EXPECT_TRUE(IsGpulaneError(r, 2, fmt::format("GPULANE_CONFIG={}: ", missing.string()))) << r.err;
    EXPECT_TRUE(Contains(r.err, "unset GPULANE_CONFIG")) << r.err;
    EXPECT_EQ(r.out, "");
  }
  RunResult pick = d.Gpulane({"pick"}, {{"GPULANE_CONFIG", "\x01unset"}, {"HOME", (d.dir() / "no-home").string()},
                                        {"XDG_CONFIG_HOME", (d.dir() / "no-xdg").string()}});
  EXPECT_EQ(pick.exit_code, 0) << pick.err;
}

// A job whose main process ends at once, leaving behind a process that survives SIGTERM (it
// notes each one in `mark`): only SIGKILL, after the kill grace, ends the job.
std::vector<std::string> LeavesAStubbornChild(const fs::path& ready, const fs::path& mark) {
  return {"/bin/sh", "-c",
          "(trap 'echo term >> \"$1\"' TERM; : > \"$0\"; while :; do sleep 0.05; done) & "
          "while [ ! -e \"$0\" ]; do sleep 0.01; done",
          ready.string(), mark.string()};
}

TEST(Config, RunKillGraceAppliesToQueuedJobs) {
  TestDaemon d({.config = "[run]\nkill_grace = \"1s\"\n"});
  const fs::path ready = d.work() / "ready", mark = d.work() / "terms";
  std::vector<std::string> args = {"--"};
  for (const auto& a : LeavesAStubbornChild(ready, mark)) args.push_back(a);
  const std::int64_t id = d.Submit(args);
  ASSERT_GT(id, 0);
  RunResult wait = d.Gpulane({"wait", std::to_string(id)}, {}, 60);
  EXPECT_EQ(wait.exit_code, 0) << wait.out << wait.err;
  json shown = d.Show(id);
  EXPECT_EQ(shown["spec"]["kill_grace_s"], 1.0) << shown.dump();
  EXPECT_TRUE(Contains(shown["reason"], "leftover")) << shown.dump();
  EXPECT_TRUE(Contains(ReadFile(mark), "term")) << "the leftover got SIGTERM and outlived it";
  ASSERT_TRUE(shown.contains("start_time") && shown.contains("end_time")) << shown.dump();
  const double ran = shown["end_time"].get<double>() - shown["start_time"].get<double>();
  EXPECT_GE(ran, 0.95) << "SIGKILL came only after the grace";
  EXPECT_LT(ran, 6) << "SIGKILL came after run.kill_grace (1 s), not the default 10 s";
  // --kill-grace still beats the file.
  const std::int64_t flagged = d.Submit({"--hold", "--kill-grace", "3s", "--", "true"});
  EXPECT_EQ(d.Show(flagged)["spec"]["kill_grace_s"], 3.0);
}

}  // namespace
}  // namespace gpulane::test
