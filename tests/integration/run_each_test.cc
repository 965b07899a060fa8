// gpulane run --each FILE through the real binary and the fake NVML (issue 13): every command line
// run like `gpulane run`, each on GPUs of its own, several at once, with a progress line on a terminal.
#include <gtest/gtest.h>

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <string>

#include "integration/run_support.h"
#include "support/daemon_fixture.h"
#include "support/terminal.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

void EachWriteText(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// Eight lines on four GPUs, one failing: every line runs once, no two at once on one GPU (a line
// takes a lock folder named after its GPU for as long as it runs), the failing line is named, and
// the exit code is 15.
TEST(RunEach, EightLinesOnFourGpusOneFailing) {
  FakeMachine machine(IdleMachine(4));
  const fs::path locks = machine.dir() / "locks", done = machine.dir() / "done";
  fs::create_directories(locks);
  fs::create_directories(done);
  std::string file_text = "# eight lines\n";
  for (int i = 0; i < 8; ++i) {
    if (i == 5) {
      file_text += "sh -c 'exit 3'\n";
      continue;
    }
    file_text += fmt::format(
        "sh -c 'mkdir \"$1/GPU$CUDA_VISIBLE_DEVICES\" && touch \"$2/{}\" && rmdir \"$1/GPU$CUDA_VISIBLE_DEVICES\"' "
        "lock \"{}\" \"{}\"\n",
        i, locks.string(), done.string());
  }
  const fs::path file = machine.dir() / "lines.txt";
  EachWriteText(file, file_text);
  RunResult r = RunOn(machine, {"--each", file.string(), "-g", "1"});
  EXPECT_EQ(r.exit_code, 15) << r.err;
  EXPECT_TRUE(Contains(r.err, "gpulane: line 7 failed: exit code 3")) << r.err;
  EXPECT_TRUE(Contains(r.err, "gpulane: 8 lines: 7 done, 1 failed (line 7)\n")) << r.err;
  for (int i = 0; i < 8; ++i)
    if (i != 5) {
      EXPECT_TRUE(fs::exists(done / std::to_string(i))) << "line of command " << i << " did not run: " << r.err;
    }
  EXPECT_TRUE(fs::is_empty(locks)) << "a line failed to take its GPU's lock folder: two lines shared a GPU";
  int started = 0;
  for (const auto& line : Lines(r.err)) started += Contains(line, " started on GPU") ? 1 : 0;
  EXPECT_EQ(started, 8) << r.err;
  EXPECT_FALSE(Contains(r.err, "\x1b")) << "without a terminal: plain lines, no progress line";
}

TEST(RunEach, AllLinesSucceedingExitZeroAndBadInputIsRefusedBeforeAnyLineRuns) {
  FakeMachine machine(IdleMachine(2));
  const fs::path file = machine.dir() / "ok.txt";
  EachWriteText(file, "true\ntrue\ntrue\n");
  RunResult r = RunOn(machine, {"--each", file.string(), "-j", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.err, "gpulane: 3 lines: all 3 done\n")) << r.err;
  EachWriteText(file, "true\ntrue 'x\n");
  EXPECT_TRUE(IsGpulaneError(RunOn(machine, {"--each", file.string()}), 2, file.string() + ":2: unterminated single quote"));
  EXPECT_TRUE(IsGpulaneError(RunOn(machine, {"--each", file.string(), "-j", "0"}), 2, "-j 0"));
  EXPECT_TRUE(IsGpulaneError(RunOn(machine, {"-j", "2", "--", "true"}), 2, "-j applies to --each"));
}

// Each line is a `gpulane run` of its own: its GPU in CUDA_VISIBLE_DEVICES (in PCI order), and
// whatever it leaves running is ended before --each returns.
TEST(RunEach, EachLineGetsItsGpuInItsEnvironmentAndLeavesNoProcessBehind) {
  FakeMachine machine(IdleMachine(2));
  const fs::path out = machine.dir() / "out";
  fs::create_directories(out);
  std::string file_text;
  for (int i = 0; i < 2; ++i)
    file_text += fmt::format(
        "sh -c 'printf \"%s %s\" \"$CUDA_VISIBLE_DEVICES\" \"$CUDA_DEVICE_ORDER\" > \"$1/env-$2\"; "
        "sleep 1000 & echo $! > \"$1/pid-$2\"' x \"{}\" {}\n",
        out.string(), i);
  const fs::path file = machine.dir() / "lines.txt";
  EachWriteText(file, file_text);
  RunResult r = RunOn(machine, {"--each", file.string(), "-g", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int i = 0; i < 2; ++i) {
    const std::string env = ReadFile(out / fmt::format("env-{}", i));
    EXPECT_TRUE(env == "0 PCI_BUS_ID" || env == "1 PCI_BUS_ID") << "line " << i << ": " << env;
    const std::string pid_text = ReadFile(out / fmt::format("pid-{}", i));
    ASSERT_FALSE(pid_text.empty()) << "line " << i << " did not start its background process: " << r.err;
    EXPECT_FALSE(ProcessExists(static_cast<pid_t>(std::stol(pid_text))))
        << "line " << i << " left its background sleep running";
  }
}

// On a terminal a progress line below the lines' events counts done, running, waiting and failed
// lines, with an ETA once a line has ended; it is erased before each event and before the summary.
TEST(RunEach, OnATerminalAProgressLineCountsTheLinesAndGivesAnEta) {
  FakeMachine machine(IdleMachine(1));
  const fs::path file = machine.dir() / "lines.txt";
  EachWriteText(file, "true\nsh -c 'exit 4'\ntrue\n");
  RunResult r = RunGpulaneWithStderrOnTerminal({"run", "--each", file.string(), "-j", "1"}, RunEnv(machine));
  EXPECT_EQ(r.exit_code, 15) << r.out;
  // -j 1: one line at a time, so every count below is reached, in this order.
  std::size_t at = 0;
  for (const char* expected :
       {"\r\x1b[Kgpulane: line 1 started on GPU0: true", "gpulane: 0/3 done, 1 running, 2 waiting, 0 failed, ETA unknown",
        "\r\x1b[Kgpulane: line 1 done in ", "gpulane: 1/3 done, 0 running, 2 waiting, 0 failed, ETA ",
        "\r\x1b[Kgpulane: line 2 failed: exit code 4", "gpulane: 1/3 done, 0 running, 1 waiting, 1 failed, ETA ",
        "gpulane: 1/3 done, 1 running, 0 waiting, 1 failed, ETA ", "\r\x1b[Kgpulane: line 3 done in ",
        "\r\x1b[Kgpulane: 3 lines: 2 done, 1 failed (line 2)"}) {
    const std::size_t found = r.out.find(expected, at);
    ASSERT_NE(found, std::string::npos) << "missing after byte " << at << ": " << expected << "\n" << r.out;
    at = found;
  }
  EXPECT_FALSE(Contains(r.out, "1/3 done, 0 running, 2 waiting, 0 failed, ETA unknown"))
      << "an ETA is known once a line has ended: " << r.out;
}

// -g 0 lines take no GPU: they run without a driver, several at once, with CUDA_VISIBLE_DEVICES empty.
TEST(RunEach, CpuOnlyLinesNeedNoDriver) {
  FakeMachine machine(IdleMachine(1));
  const fs::path file = machine.dir() / "cpu.txt";
  EachWriteText(file, "sh -c 'printf \"[%s]\" \"$CUDA_VISIBLE_DEVICES\"'\nsh -c 'printf \"[%s]\" \"$CUDA_VISIBLE_DEVICES\"'\n");
  RunResult r = RunOn(machine, {"--each", file.string(), "-g", "0"},
                      {{"GPULANE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[][]");
  EXPECT_TRUE(Contains(r.err, "gpulane: line 1 started without GPUs")) << r.err;
  // The line as written, quoting kept (it was "sh -c printf "[%s]" "$CUDA_VISIBLE_DEVICES"").
  EXPECT_TRUE(Contains(r.err, "without GPUs: sh -c 'printf \"[%s]\" \"$CUDA_VISIBLE_DEVICES\"'\n")) << r.err;
}

}  // namespace
}  // namespace gpulane::test
