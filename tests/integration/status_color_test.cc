// `gpulane status` colours only a terminal, respects NO_COLOR, and --color overrides both.
#include <gtest/gtest.h>

#include "support/harness.h"
#include "support/scenarios.h"
#include "support/terminal.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

constexpr const char* kEscape = "\x1b[";

Env Without(Env env, const char* name) {
  env[name] = "\x01unset";
  return env;
}

class StatusColor : public ::testing::Test {
 protected:
  FakeMachine machine_{RecordedH200x2(UnusedPid())};
  Env colour_ok_ = Without(machine_.env(), "NO_COLOR");
};

TEST_F(StatusColor, ATerminalGetsColour) {
  RunResult r = RunGpulaneOnTerminal({"status"}, colour_ok_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "NVIDIA H200")) << r.out;
  EXPECT_TRUE(Contains(r.out, kEscape)) << r.out;
}

TEST_F(StatusColor, NoColorTurnsItOffOnATerminal) {
  Env env = colour_ok_;
  env["NO_COLOR"] = "1";
  RunResult r = RunGpulaneOnTerminal({"status"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "NVIDIA H200")) << r.out;
  EXPECT_FALSE(Contains(r.out, kEscape)) << r.out;
}

TEST_F(StatusColor, AnEmptyNoColorDoesNotCount) {
  Env env = colour_ok_;
  env["NO_COLOR"] = "";  // no-color.org: "present and not an empty string"
  RunResult r = RunGpulaneOnTerminal({"status"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, kEscape)) << r.out;
}

TEST_F(StatusColor, ColorNeverTurnsItOffOnATerminal) {
  RunResult r = RunGpulaneOnTerminal({"status", "--color", "never"}, colour_ok_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "NVIDIA H200")) << r.out;
  EXPECT_FALSE(Contains(r.out, kEscape)) << r.out;
}

TEST_F(StatusColor, APipeGetsNoColour) {
  RunResult r = RunGpulane({"status"}, colour_ok_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "NVIDIA H200")) << r.out;
  EXPECT_FALSE(Contains(r.out, kEscape)) << r.out;
}

TEST_F(StatusColor, ColorAlwaysColoursAPipeEvenWithNoColor) {
  RunResult r = RunGpulane({"status", "--color", "always"}, colour_ok_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, kEscape)) << r.out;
  r = RunGpulane({"status", "--color", "always"}, machine_.env());  // NO_COLOR=1: the flag wins
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, kEscape)) << r.out;
}

TEST_F(StatusColor, JsonIsNeverColoured) {
  RunResult r = RunGpulaneOnTerminal({"status", "--json"}, colour_ok_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "\"schema_version\"")) << r.out;
  EXPECT_FALSE(Contains(r.out, kEscape)) << r.out;
}

TEST_F(StatusColor, BadColorValueIsAUsageError) {
  RunResult r = RunGpulane({"status", "--color", "sometimes"}, machine_.env());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_EQ(LineCount(r.err), 1) << r.err;
}

}  // namespace
}  // namespace gpulane::test
