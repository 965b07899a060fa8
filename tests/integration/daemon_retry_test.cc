// gpulane submit --retry N through the binary, with a user-mode daemon on the fake machine: a job
// that fails runs again (GPULANE_RETRY = its attempt), show lists every attempt, the logs get a
// line per retry, and a daemon restart keeps the attempts; a command that could not start is
// retried as a failure. The daemon's own decisions (the last retry, no retry after a cancel or a
// timeout, an --after dependant waiting for the final outcome, "retry 1/3" in the queue, the
// count across a restart, the bound of --retry) are tested in-process:
// tests/unit/daemon_inproc_recovery_test.cc; what `submit --retry` refuses, in
// DaemonSubmit.CommandLineErrors.
#include <fstream>
#include <gtest/gtest.h>

#include <filesystem>
#include <fmt/format.h>

#include "support/daemon_fixture.h"
#include "support/harness.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<int> ExitCodes(const json& attempts) {
  std::vector<int> out;
  for (const auto& a : attempts) out.push_back(a.value("exit_code", -1));
  return out;
}

TEST(DaemonRetry, AJobThatFailsTwiceCompletesOnItsThirdAttempt) {
  TestDaemon d;
  const std::string out = (d.work() / "retry.out").string(), err = (d.work() / "retry.err").string();
  const std::int64_t id = d.Submit({"--retry", "3", "-o", out, "-e", err, "--", "sh", "-c",
                                    "echo \"run $GPULANE_RETRY\"; test \"$GPULANE_RETRY\" = 2 || exit 3"});
  RunResult wait = d.Gpulane({"wait", Id(id)}, {}, 120);
  EXPECT_EQ(wait.exit_code, 0) << wait.out << wait.err;
  json shown = d.Show(id);
  EXPECT_EQ(shown["state"], "completed");
  EXPECT_EQ(shown["exit_code"], 0);
  EXPECT_EQ(shown["attempt"], 2);
  EXPECT_EQ(shown["spec"]["retries"], 3);
  ASSERT_TRUE(shown["attempts"].is_array()) << shown.dump();
  ASSERT_EQ(shown["attempts"].size(), 3u) << shown.dump();
  EXPECT_EQ(ExitCodes(shown["attempts"]), (std::vector<int>{3, 3, 0}));
  double previous_end = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    const json& a = shown["attempts"][i];
    EXPECT_EQ(a["attempt"], i);
    ASSERT_TRUE(a.contains("start_time") && a.contains("end_time")) << a.dump();
    EXPECT_GE(a["start_time"].get<double>(), previous_end) << "one attempt after the other";
    previous_end = a["end_time"].get<double>();
    EXPECT_EQ(a["gpu_indices"].size(), 1u) << a.dump();
    EXPECT_EQ(a["gpu_uuids"].size(), 1u) << a.dump();
  }
  // Every attempt appended to the same files; stderr has a line before each retry.
  EXPECT_EQ(ReadFile(out), "run 0\nrun 1\nrun 2\n");
  EXPECT_EQ(ReadFile(err),
            "gpulane: attempt 2 of 4 (retry 1 of 3) after exit code 3\n"
            "gpulane: attempt 3 of 4 (retry 2 of 3) after exit code 3\n");
  RunResult logs = d.Gpulane({"logs", Id(id)});
  EXPECT_EQ(logs.out, "run 0\nrun 1\nrun 2\n") << "the job's output is every attempt's";
  // The text form lists the attempts too.
  RunResult text = d.Gpulane({"show", Id(id)});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(Contains(text.out, "attempts  3: 2 of --retry 3 used\n")) << text.out;
  EXPECT_TRUE(Contains(text.out, "exit code 3")) << text.out;
  // A restarted daemon still knows them (they are in the store).
  d.Kill9();
  ASSERT_TRUE(d.Start());
  EXPECT_EQ(ExitCodes(d.Show(id)["attempts"]), (std::vector<int>{3, 3, 0}));
}

TEST(DaemonRetry, ACommandThatCouldNotStartIsRetriedAsAFailure) {
  TestDaemon d;
  // It exists when submitted (submit refuses a command it cannot find) and is gone when it starts.
  const fs::path program = d.work() / "no-such-command";
  { std::ofstream(program) << "#!/bin/sh\n"; }
  fs::permissions(program, fs::perms::owner_all);
  const std::int64_t id = d.Submit({"--hold", "--retry", "1", "--", "./no-such-command"});
  fs::remove(program);
  ASSERT_EQ(d.Gpulane({"release", Id(id)}).exit_code, 0);
  RunResult wait = d.Gpulane({"wait", Id(id)}, {}, 60);
  EXPECT_EQ(wait.exit_code, 127) << wait.out << wait.err;
  json shown = d.Show(id);
  EXPECT_EQ(shown["state"], "failed");
  ASSERT_EQ(shown["attempts"].size(), 2u) << shown.dump();
  EXPECT_EQ(ExitCodes(shown["attempts"]), (std::vector<int>{127, 127}));
  EXPECT_TRUE(Contains(shown["attempts"][0].value("reason", ""), "no-such-command")) << shown.dump();
}

}  // namespace
}  // namespace gpulane::test
