// The command line registers only the subcommand its first argument names (src/cli/main.cc:
// building every subcommand's options was a fifth of a submission's own time). Every subcommand
// must still be found by its name, --help must still list them all, and anything else must still
// be refused as before.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "support/harness.h"
#include "support/scenarios.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

const std::vector<std::string> kSubcommands = {"status", "pick",    "run",  "submit", "queue", "show",
                                               "cancel", "hold", "release", "wait", "logs",  "daemon", "top"};

TEST(CliSubcommands, HelpListsEveryOne) {
  FakeMachine machine(RecordedH200x2(UnusedPid()));
  RunResult r = RunGpulane({"--help"}, machine.env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string& name : kSubcommands)
    EXPECT_TRUE(Contains(r.out, fmt::format("\n  {} ", name))) << name << " is missing from:\n" << r.out;
  EXPECT_FALSE(Contains(r.out, "_supervise")) << "the daemon's own subcommand is not for people";
}

TEST(CliSubcommands, EachIsFoundByItsNameWithItsOwnOptions) {
  FakeMachine machine(RecordedH200x2(UnusedPid()));
  for (const std::string& name : kSubcommands) {
    RunResult r = RunGpulane({name, "--help"}, machine.env());
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
    EXPECT_TRUE(Contains(r.out, fmt::format("Usage: gpulane {} ", name))) << name << ":\n" << r.out;
  }
  // Options of one subcommand are not another's.
  RunResult pick = RunGpulane({"pick", "--array", "0-3"}, machine.env());
  EXPECT_EQ(pick.exit_code, 2) << pick.out << pick.err;
  EXPECT_TRUE(Contains(pick.err, "--array")) << pick.err;
  RunResult status = RunGpulane({"status", "--json"}, machine.env());
  EXPECT_EQ(status.exit_code, 0) << status.err;
}

TEST(CliSubcommands, AnythingElseIsRefusedAsBefore) {
  FakeMachine machine(RecordedH200x2(UnusedPid()));
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{{}, {"sbmit"}, {"--bogus"}, {"Submit"}}) {
    RunResult r = RunGpulane(args, machine.env());
    std::string line;
    for (const std::string& a : args) line += " " + a;
    EXPECT_EQ(r.exit_code, 2) << "gpulane" << line;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(LineCount(r.err), 1) << r.err;
    EXPECT_TRUE(Contains(r.err, "gpulane: error:")) << r.err;
  }
  RunResult version = RunGpulane({"--version"}, machine.env());
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_TRUE(Contains(version.out, "gpulane 0.1.0")) << version.out;
}

}  // namespace
}  // namespace gpulane::test
