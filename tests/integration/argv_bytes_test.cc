// Invalid UTF-8 in a command (issue 9, item 14), through the real binary: a job runs with exactly
// the bytes it was given — its arguments, its environment's values and its working directory —
// whether it is queued (`submit`: the bytes cross the protocol, the store and the supervisor's spec
// file as JSON) or run at once (`run`); `show --json`/`queue --json` present them losslessly
// ({"b64": ...} for values that are not UTF-8, util/bytes_json.h), and `gpulane logs` gives back
// the job's output bytes as they are.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/daemon_fixture.h"
#include "support/harness.h"
#include "support/text.h"
#include "util/bytes_json.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kBytes = "\xff\xfe";  // no UTF-8 at all
const std::string kMixed = "caf\xc3\xa9-\x80-\xed\xa0\x80";  // é, a stray continuation byte, a surrogate

TEST(ArgvBytes, SubmittedJobGetsTheExactBytesAndShowJsonKeepsThem) {
  TestDaemon d;
  const std::int64_t id = d.Submit({"--", "printf", "%s|%s", kBytes, kMixed});
  ASSERT_GT(id, 0);
  RunResult wait = d.Gpulane({"wait", std::to_string(id)});
  ASSERT_EQ(wait.exit_code, 0) << wait.err;
  EXPECT_EQ(ReadFile(d.work() / ("gpulane-" + std::to_string(id) + ".out")), kBytes + "|" + kMixed);
  EXPECT_EQ(d.Gpulane({"logs", std::to_string(id)}).out, kBytes + "|" + kMixed);

  // show --json: the arguments that are no UTF-8 as base64 objects holding their exact bytes.
  const json shown = d.Show(id);
  EXPECT_EQ(shown["spec"]["argv"], json::array({"printf", "%s|%s", json{{"b64", "//4="}},
                                                json{{"b64", Base64Encode(kMixed)}}}));
  std::vector<std::string> argv;
  ASSERT_TRUE(BytesListFromJson(shown["spec"]["argv"], &argv));
  EXPECT_EQ(argv, (std::vector<std::string>{"printf", "%s|%s", kBytes, kMixed}));
  // queue --json (the daemon's own writer) says the same.
  json listed;
  for (const auto& job : d.Queue({"-a"}))
    if (job["id"] == id) listed = job;
  EXPECT_EQ(listed["spec"]["argv"], shown["spec"]["argv"]);
  // The text view shows the bytes visibly, each word quoted as sh reads it back where it must be
  // (a new user's "printf %s|%s" could not be pasted: the | made it a pipe).
  RunResult show = d.Gpulane({"show", std::to_string(id)});
  EXPECT_TRUE(Contains(show.out, "  command   printf '%s|%s' '\\xff\\xfe' 'caf\xc3\xa9-\\x80-\\xed\\xa0\\x80'\n")) << show.out;
  // The GPU it ran on, by index and UUID (it was a JSON list of UUIDs).
  EXPECT_TRUE(Contains(show.out, "  gpu uuids GPU0 GPU-")) << show.out;
  EXPECT_FALSE(Contains(show.out, "[\"GPU-")) << show.out;
}

TEST(ArgvBytes, SubmittedJobGetsTheExactEnvironmentAndDirectory) {
  TestDaemon d;
  const fs::path dir = d.work() / ("dir" + kBytes);
  fs::create_directories(dir);
  RunResult submit = d.Gpulane({"submit", "--", "sh", "-c", "printf '%s|%s' \"$(pwd -P)\" \"$BYTES\""}, {{"BYTES", kMixed}}, 60,
                               dir.string());
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::string id = Lines(submit.out).at(0);
  RunResult wait = d.Gpulane({"wait", id});
  ASSERT_EQ(wait.exit_code, 0) << wait.err;
  // The default log is in the job's directory, whose name is no UTF-8.
  EXPECT_EQ(ReadFile(dir / ("gpulane-" + id + ".out")), fs::canonical(dir).string() + "|" + kMixed);
  const json shown = d.Show(std::stoll(id));
  std::string cwd, log;
  ASSERT_TRUE(BytesFromJson(shown["spec"]["cwd"], &cwd));
  EXPECT_EQ(cwd, dir.string());
  EXPECT_TRUE(shown["spec"]["cwd"].is_object());
  ASSERT_TRUE(BytesFromJson(shown["logs"]["stdout_path"], &log));
  EXPECT_EQ(log, (dir / ("gpulane-" + id + ".out")).string());
}

TEST(ArgvBytes, RunGivesTheJobTheExactBytes) {
  FakeMachine machine(RecordedH200x2(UnusedPid()));
  RunResult run = RunGpulane({"run", "-q", "--", "printf", "%s|%s", kBytes, kMixed}, machine.env());
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, kBytes + "|" + kMixed);
  // A command that cannot run is named visibly, on one error line.
  RunResult missing = RunGpulane({"run", "-q", "--", "/nonexistent/" + kBytes}, machine.env());
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_EQ(missing.err, "gpulane: error: cannot run '/nonexistent/\\xff\\xfe': no such file\n");
}

}  // namespace
}  // namespace gpulane::test
