// `gpulane top` through the real binary under tmux (a real terminal of a fixed size): a daemon
// with its sampler over the fake NVML; every GPU, a job's process, the queue and sparklines shown;
// the view follows the fake NVML; keys sort, filter and quit; the terminal is restored after q,
// Ctrl-C and SIGTERM. Without a daemon it reads NVML and says there is no history; without a
// terminal it prints `gpulane status` frames. No sleeps: each step polls the screen (bounded).
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "support/daemon_fixture.h"
#include "support/scenarios.h"
#include "support/text.h"
#include "support/tmux.h"
#include "util/display_width.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Screen = std::vector<std::string>;

constexpr const char* kTopFastSampler = "[telemetry]\ninterval = \"100ms\"\n";
constexpr int kColumns = 160, kRows = 50;

// The script a pane runs: the terminal's settings before and after, `gpulane top ARGS` (its pid in
// top.pid, its exit code in top.rc), then a last line on the main screen, and a shell that waits
// for a line (the pane stays until the session ends: tmux may drop what a dying pane wrote last).
fs::path WriteTopScript(const fs::path& dir, const Env& env, const std::string& args) {
  const fs::path script = dir / "top.sh";
  Env with = env;
  with["LANG"] = "C.UTF-8";
  with["LC_ALL"] = "\x01unset";
  with["LC_CTYPE"] = "\x01unset";
  std::ofstream(script) << ScriptWithEnv(
      with, fmt::format("trap true INT\n"  // as an interactive shell, it outlives a Ctrl-C meant for top
                        "stty -g > stty.before\n"
                        "sh -c 'echo $$ > top.pid; exec \"$0\" top {}' '{}'\n"
                        "echo \"$?\" > top.rc.tmp && mv top.rc.tmp top.rc\n"
                        "stty -g > stty.tmp && mv stty.tmp stty.after\n"
                        "echo TOP-ENDED\n"
                        "read line",
                        args, GpulaneBinary()));
  return script;
}

// The row that starts with `prefix`, "" when none.
std::string Row(const Screen& s, const std::string& prefix) {
  for (const auto& line : s)
    if (line.rfind(prefix, 0) == 0) return line;
  return "";
}

// The index of the first row containing `part`, s.size() when none.
std::size_t Find(const Screen& s, const std::string& part) {
  for (std::size_t i = 0; i < s.size(); ++i)
    if (Contains(s[i], part)) return i;
  return s.size();
}

bool Has(const Screen& s, const std::string& part) { return Find(s, part) < s.size(); }

// The process row of `pid` ("  GPU     PID ...").
std::size_t ProcessRow(const Screen& s, std::uint32_t pid) {
  for (std::size_t i = 0; i < s.size(); ++i)
    if (s[i].size() > 12 && s[i].substr(4, 7) == fmt::format("{:>7}", pid)) return i;
  return s.size();
}

// Full blocks in the utilisation bar of GPU `index`'s row.
int UtilBarBlocks(const Screen& s, unsigned index) {
  const std::string row = Row(s, fmt::format("{:>2} ", index));
  const auto open = row.find("UTIL ["), close = row.find(']', open);
  if (open == std::string::npos || close == std::string::npos) return -1;
  int blocks = 0;
  for (auto at = row.find("█", open); at != std::string::npos && at < close; at = row.find("█", at + 1)) ++blocks;
  return blocks;
}

// After the view ended: exit code 0, the terminal's settings as before, the main screen back with
// the cursor shown.
void ExpectRestored(const TmuxSession& tmux, const fs::path& dir) {
  ASSERT_TRUE(Eventually([&] { return fs::exists(dir / "top.rc") && fs::exists(dir / "stty.after"); }, 20))
      << tmux.ScreenText();
  EXPECT_EQ(ReadFile(dir / "top.rc"), "0\n");
  EXPECT_EQ(ReadFile(dir / "stty.after"), ReadFile(dir / "stty.before")) << "the terminal's modes are restored";
  ASSERT_TRUE(tmux.WaitForScreen([](const Screen& s) { return Has(s, "TOP-ENDED"); })) << tmux.ScreenText();
  EXPECT_FALSE(Has(tmux.Screen(), "PROCESSES")) << "the view was on the alternate screen\n" << tmux.ScreenText();
  EXPECT_EQ(tmux.Format("#{alternate_on}"), "0");
  EXPECT_EQ(tmux.Format("#{cursor_flag}"), "1");
}

std::string TopUserName() {
  const passwd* pw = getpwuid(geteuid());
  return pw ? pw->pw_name : std::to_string(geteuid());
}

TEST(Top, TmuxIsInstalled) {
  ASSERT_NE(TmuxBinary(), "") << "tmux is missing: the top tests drive a real terminal; scripts/test.sh installs it";
}

TEST(Top, ShowsTheMachineFollowsItSortsFiltersAndQuitsWithQ) {
  ASSERT_NE(TmuxBinary(), "") << "tmux is missing: scripts/test.sh installs it";
  DaemonOptions options;
  options.state = IdleGpus(2);
  SetUtilization((*options.state)["devices"][0], 10);
  options.config = kTopFastSampler;
  TestDaemon d(options);
  ForeignProcess other;
  // A queued job on GPU 0 whose process holds 3 GiB there; another user's 5 GiB on GPU 1.
  const fs::path pid_file = d.work() / "job.pid", gate = d.work() / "gate";
  const std::int64_t id = d.Submit({"--gpus", "0", "--name", "trainer", "--", "sh", "-c",
                                    fmt::format("echo $$ > {}; while [ ! -e {} ]; do sleep 0.05; done", pid_file.string(), gate.string())});
  ASSERT_TRUE(d.WaitForState(id, "running"));
  ASSERT_TRUE(Eventually([&] { return !ReadFile(pid_file).empty(); }, 30));
  const auto job_pid = static_cast<std::uint32_t>(std::stoul(ReadFile(pid_file)));
  AddProcess(d.machine().state()["devices"][0], job_pid, 3ULL << 30);
  AddProcess(d.machine().state()["devices"][1], other.pid(), 5ULL << 30);
  d.machine().Save();

  TmuxSession tmux(d.dir(), WriteTopScript(d.dir(), d.env(), "--interval 0.2"), kColumns, kRows);
  ASSERT_TRUE(tmux.started());
  const std::string job_row = fmt::format("{:<10} {:<8}", TopUserName(), id);
  ASSERT_TRUE(tmux.WaitForScreen([&](const Screen& s) {
    return !Row(s, " 0 NVIDIA H200").empty() && !Row(s, " 1 NVIDIA H200").empty() && Has(s, "5m [") &&
           ProcessRow(s, job_pid) < s.size() && Contains(s[ProcessRow(s, job_pid)], job_row) &&
           Contains(s[ProcessRow(s, job_pid)], "3.0 GiB") && ProcessRow(s, other.pid()) < s.size() &&
           Has(s, fmt::format("{:>8} {:<10} trainer", id, TopUserName())) && Has(s, "running") &&
           Has(s, "QUEUE  1 job: 1 running");
  })) << tmux.ScreenText();
  EXPECT_TRUE(Contains(Row(tmux.Screen(), " 0 NVIDIA H200"), fmt::format("job {} ({})", id, TopUserName()))) << tmux.ScreenText();

  // The fake GPU 0 gets busy: its number and bar follow.
  const int blocks_before = UtilBarBlocks(tmux.Screen(), 0);
  SetUtilization(d.machine().state()["devices"][0], 90);
  d.machine().Save();
  ASSERT_TRUE(tmux.WaitForScreen([](const Screen& s) { return Contains(Row(s, " 0 NVIDIA H200"), "]  90%"); }))
      << tmux.ScreenText();
  EXPECT_GT(UtilBarBlocks(tmux.Screen(), 0), blocks_before) << tmux.ScreenText();

  // m: by memory, the 5 GiB process first; g: by GPU again.
  EXPECT_LT(ProcessRow(tmux.Screen(), job_pid), ProcessRow(tmux.Screen(), other.pid()));
  tmux.Keys({"m"});
  ASSERT_TRUE(tmux.WaitForScreen([&](const Screen& s) {
    return Has(s, "sorted by memory") && ProcessRow(s, other.pid()) < ProcessRow(s, job_pid);
  })) << tmux.ScreenText();
  tmux.Keys({"g"});
  ASSERT_TRUE(tmux.WaitForScreen([&](const Screen& s) {
    return Has(s, "sorted by gpu") && ProcessRow(s, job_pid) < ProcessRow(s, other.pid());
  })) << tmux.ScreenText();

  // f: only the other user's process (and no job of theirs in the queue); Esc: everyone again.
  tmux.Keys({"f"});
  tmux.Type(other.user());
  tmux.Keys({"Enter"});
  ASSERT_TRUE(tmux.WaitForScreen([&](const Screen& s) {
    return Has(s, "PROCESSES  1 of 2") && ProcessRow(s, job_pid) == s.size() && ProcessRow(s, other.pid()) < s.size() &&
           Has(s, "QUEUE  0 jobs");
  })) << tmux.ScreenText();
  tmux.Keys({"Escape"});
  ASSERT_TRUE(tmux.WaitForScreen([&](const Screen& s) { return Has(s, "PROCESSES  2 of 2"); })) << tmux.ScreenText();

  // A smaller terminal: drawn again to its size, the keys on its last row, temperatures left out.
  tmux.Resize(90, 20);
  ASSERT_TRUE(tmux.WaitForScreen([](const Screen& s) {
    return s.size() == 20 && s.back().rfind("q quit", 0) == 0 && !Row(s, " 0 NVIDIA H200").empty() &&
           !Contains(Row(s, " 0 NVIDIA H200"), "°C");
  })) << tmux.ScreenText();
  for (const std::string& line : tmux.Screen()) EXPECT_LE(DisplayColumns(line), 90u) << line;

  tmux.Keys({"q"});
  ExpectRestored(tmux, d.dir());
  Touch(gate);
}

TEST(Top, WithTelemetryOffItSaysThereIsNoHistoryAndCtrlCRestoresTheTerminal) {
  ASSERT_NE(TmuxBinary(), "") << "tmux is missing: scripts/test.sh installs it";
  TestDaemon d;  // the fixture's default: telemetry off
  TmuxSession tmux(d.dir(), WriteTopScript(d.dir(), d.env(), ""), 120, 30);
  ASSERT_TRUE(tmux.started());
  ASSERT_TRUE(tmux.WaitForScreen([](const Screen& s) {
    return Has(s, "no history (sparklines): telemetry is off") && !Row(s, " 1 NVIDIA H200").empty() &&
           Has(s, "QUEUE  0 jobs");
  })) << tmux.ScreenText();
  EXPECT_FALSE(Has(tmux.Screen(), "5m [")) << tmux.ScreenText();
  tmux.Keys({"C-c"});
  ExpectRestored(tmux, d.dir());
}

TEST(Top, WithoutADaemonItReadsNvmlAndSigtermRestoresTheTerminal) {
  ASSERT_NE(TmuxBinary(), "") << "tmux is missing: scripts/test.sh installs it";
  FakeMachine machine(EightGpus());
  TmuxSession tmux(machine.dir(), WriteTopScript(machine.dir(), machine.env(), "--interval 0.2"), 140, 40);
  ASSERT_TRUE(tmux.started());
  ASSERT_TRUE(tmux.WaitForScreen([](const Screen& s) {
    return Has(s, "no gpulane daemon answers") && !Row(s, " 7 NVIDIA H200").empty();
  })) << tmux.ScreenText();
  EXPECT_FALSE(Has(tmux.Screen(), "QUEUE")) << tmux.ScreenText();
  SetUsedMemory(machine.state()["devices"][3], 77ULL << 30);
  machine.Save();
  ASSERT_TRUE(tmux.WaitForScreen([](const Screen& s) { return Contains(Row(s, " 3 NVIDIA H200"), " 77.0/"); }))
      << tmux.ScreenText();
  ASSERT_EQ(kill(static_cast<pid_t>(std::stol(ReadFile(machine.dir() / "top.pid"))), SIGTERM), 0);
  ExpectRestored(tmux, machine.dir());
}

TEST(Top, WithoutATerminalItPrintsStatusFrames) {
  FakeMachine machine(RecordedH200x2(UnusedPid()));
  RunResult r = RunGpulane({"top", "--interval", "0.1", "--iterations", "2"}, machine.env(), 30);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_FALSE(Contains(r.out, "\x1b")) << r.out;
  const std::vector<std::string> lines = Lines(r.out);
  int gpu0 = 0, gpu1 = 0;
  for (const auto& line : lines) gpu0 += line.rfind("[0] NVIDIA H200", 0) == 0, gpu1 += line.rfind("[1] NVIDIA H200", 0) == 0;
  EXPECT_EQ(gpu0, 2) << "two frames of `gpulane status`\n" << r.out;
  EXPECT_EQ(gpu1, 2) << r.out;
}

TEST(Top, ABadOptionIsOneLineNamingIt) {
  FakeMachine machine(RecordedH200x2(UnusedPid()));
  for (const char* bad : {"soon", "0.01", "2h"}) {
    RunResult r = RunGpulane({"top", "--interval", bad}, machine.env(), 10);
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(LineCount(r.err), 1) << r.err;
    EXPECT_TRUE(Contains(r.err, fmt::format("--interval '{}': give the refresh interval in seconds", bad))) << r.err;
  }
  RunResult r = RunGpulane({"top", "--iterations", "-1"}, machine.env(), 10);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "--iterations -1: give how many refreshes")) << r.err;
}

}  // namespace
}  // namespace gpulane::test
