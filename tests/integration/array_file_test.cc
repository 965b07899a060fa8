// gpulane submit --array-file FILE through the real binary and daemon (issue 13): one array task
// per command line, each with its own argv, split as a shell would but not run through one.
#include <gtest/gtest.h>

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <string>

#include "integration/run_support.h"
#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

void WriteText(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

TEST(SubmitArrayFile, EachLineIsATaskWithItsOwnArgvAsAShellWouldSplitIt) {
  TestDaemon d;
  const fs::path file = d.work() / "commands.txt";
  WriteText(file,
            "# a sweep\n"
            "\n"
            "printf '%s|' 'a  b' \"c \\\"d\\\"\" e\\ f   # three words\n"
            "printf '%s|' one\\|two\n"
            "sh -c 'printf \"%s|\" \"$GPULANE_ARRAY_INDEX\" \"$0\"' x\n");
  RunResult r = d.Gpulane({"submit", "--array-file", file.string(), "-o", "out-%a.txt"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::int64_t a = std::stoll(r.out);
  EXPECT_TRUE(Contains(r.err, fmt::format("array job {}: 3 tasks from {}, {}_[0-2]", a, file.string(), a))) << r.err;
  RunResult waited = d.Gpulane({"wait", Id(a)});
  ASSERT_EQ(waited.exit_code, 0) << waited.err;
  EXPECT_EQ(ReadFile(d.work() / "out-0.txt"), "a  b|c \"d\"|e f|");
  EXPECT_EQ(ReadFile(d.work() / "out-1.txt"), "one|two|") << "an escaped | is a character, not a pipe";
  EXPECT_EQ(ReadFile(d.work() / "out-2.txt"), "2|x|") << "a line starting with sh -c is the shell's own argv";
  // Each task keeps its own command, also once the daemon has read them back from its store.
  auto argv_of = [&](int task) {
    RunResult show = d.Gpulane({"show", "--json", fmt::format("{}_{}", a, task)});
    EXPECT_EQ(show.exit_code, 0) << show.err;
    return json::parse(show.out, nullptr, false)["spec"]["argv"];
  };
  const json expected = json::array({"printf", "%s|", "one|two"});
  EXPECT_EQ(argv_of(1), expected);
  d.Kill9();
  ASSERT_TRUE(d.Start());
  EXPECT_EQ(argv_of(1), expected);
  EXPECT_EQ(argv_of(0), json::array({"printf", "%s|", "a  b", "c \"d\"", "e f"}));
  EXPECT_EQ(d.Show(a)["spec"]["name"], "commands.txt") << "the array is named after its file";
}

TEST(SubmitArrayFile, ArrayPicksCommandsByPosition) {
  TestDaemon d;
  const fs::path file = d.work() / "c.txt";
  WriteText(file, "echo zero\necho one\necho two\n");
  RunResult r = d.Gpulane({"submit", "--hold", "--array", "2", "--array-file", file.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  RunResult show = d.Gpulane({"show", "--json", fmt::format("{}_2", std::stoll(r.out))});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_EQ(json::parse(show.out)["spec"]["argv"], json::array({"echo", "two"}));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--array", "1,3", "--array-file", file.string()}), 2,
                             "--array 3: " + file.string() + " has 3 commands, tasks 0 to 2"));
}

TEST(SubmitArrayFile, ABadLineIsNamedByNumberAndNothingIsQueued) {
  TestDaemon d;
  const fs::path file = d.work() / "bad.txt";
  WriteText(file, "echo fine\n# fine too\necho 'never closed\necho after\n");
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--array-file", file.string()}), 2,
                             file.string() + ":3: unterminated single quote (') opened at column 6: close it on the same line"));
  WriteText(file, "python a.py > out.txt\n");
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--array-file", file.string()}), 2,
                             file.string() + ":1: '>' at column 13 is shell syntax"));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--array-file", file.string(), "--", "true"}), 2,
                             "gives the commands: leave out the command 'true'"));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"submit", "--array-file", (d.work() / "missing.txt").string()}), 2,
                             "cannot read the command file"));
  EXPECT_TRUE(d.Queue({"--all"}).empty()) << d.Queue({"--all"}).dump();
}

}  // namespace
}  // namespace gpulane::test
