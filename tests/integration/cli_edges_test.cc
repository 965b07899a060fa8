// The edges a new user met in the first ten minutes (issue 24, part 5), each through the binary as
// the user typed it: mistyped commands and options, durations without a unit, Slurm's --time, a
// command that cannot run. What a queued job says it waits for is the daemon's, tested in-process:
// tests/unit/daemon_inproc_reasons_test.cc (how show prints it: DaemonCancel.JobWaitingForGpusNeverRuns).
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>

#include "support/daemon_fixture.h"
#include "support/harness.h"
#include "support/scenarios.h"
#include "support/text.h"
#include "integration/run_support.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;

// ---- mistyped commands and options ------------------------------------------------------------

// `gpulane qeue` said only "A subcommand is required".
TEST(CliEdges, AMistypedCommandNamesTheNearestOne) {
  FakeMachine machine(EightGpus());
  RunResult r = RunGpulane({"qeue"}, machine.env());
  EXPECT_TRUE(IsGpulaneError(r, 2, "unknown command 'qeue': did you mean queue?")) << r.err;
  r = RunGpulane({"stauts", "--json"}, machine.env());
  EXPECT_TRUE(IsGpulaneError(r, 2, "did you mean status?")) << r.err;
  r = RunGpulane({"frobnicate"}, machine.env());
  EXPECT_TRUE(IsGpulaneError(r, 2, "unknown command 'frobnicate' (gpulane --help lists the commands)")) << r.err;
  EXPECT_FALSE(Contains(r.err, "did you mean")) << "nothing near: no guess";
  r = RunGpulane({"supervise"}, machine.env());
  EXPECT_FALSE(Contains(r.err, "_supervise")) << "internal commands are never offered: " << r.err;
}

// A new user typed `gpulane history`, as other tools call it, and was told only that it is unknown.
// Other tools' words say where gpulane has it; a word near a command still gets that command.
TEST(CliEdges, AnotherToolsWordSaysWhereGpulaneHasIt) {
  FakeMachine machine(EightGpus());
  RunResult r = RunGpulane({"history"}, machine.env());
  EXPECT_TRUE(IsGpulaneError(r, 2, "unknown command 'history': finished jobs are in 'gpulane queue --all', their use in "
                                   "'gpulane report --by job' (gpulane --help lists the commands)")) << r.err;
  struct Word {
    const char* typed;
    const char* says;
  };
  for (const Word& w : {Word{"jobs", "'gpulane queue'"}, Word{"ps", "'gpulane queue'"}, Word{"ls", "'gpulane queue'"},
                        Word{"kill", "'gpulane cancel JOB'"}, Word{"rm", "'gpulane cancel JOB'"}, Word{"nvidia-smi", "'gpulane status'"},
                        Word{"gpustat", "'gpulane status'"}, Word{"sbatch", "'gpulane submit -g N -- COMMAND'"}}) {
    r = RunGpulane({w.typed}, machine.env());
    EXPECT_TRUE(IsGpulaneError(r, 2, fmt::format("unknown command '{}': ", w.typed))) << r.err;
    EXPECT_TRUE(Contains(r.err, w.says)) << w.typed << ": " << r.err;
    EXPECT_FALSE(Contains(r.err, "did you mean")) << w.typed << " is near no command: " << r.err;
  }
  r = RunGpulane({"stat"}, machine.env());
  EXPECT_TRUE(IsGpulaneError(r, 2, "unknown command 'stat': did you mean status?")) << "the nearest command first: " << r.err;
}

TEST(CliEdges, AMistypedOptionNamesTheNearestOne) {
  FakeMachine machine(EightGpus());
  RunResult r = RunGpulane({"status", "--jsn"}, machine.env());
  EXPECT_TRUE(IsGpulaneError(r, 2, "unknown option '--jsn' for gpulane status: did you mean --json?")) << r.err;
  r = RunGpulane({"pick", "--min-fre", "20GiB"}, machine.env());
  EXPECT_TRUE(IsGpulaneError(r, 2, "did you mean --min-free?")) << r.err;
  r = RunGpulane({"run", "--tiemout", "5m", "--", "true"}, machine.env());
  EXPECT_TRUE(IsGpulaneError(r, 2, "unknown option '--tiemout' for gpulane run: did you mean --timeout?")) << r.err;
  r = RunGpulane({"queue", "--frobnicate"}, machine.env());
  EXPECT_TRUE(IsGpulaneError(r, 2, "unknown option '--frobnicate' for gpulane queue")) << r.err;
}

// Slurm's --time (and -t) is gpulane's --time-limit; `submit --time 1h` said "put the whole command
// after --", which was no help.
// A new user's trial: `run -g two` said "Could not convert: --gpu-count = two", `logs` without an id
// "job is required", and `run --help` showed no place for the command. Each now names what was
// typed and what it takes.
TEST(CliEdges, ABadValueOrAMissingJobIdIsSaidAsTyped) {
  FakeMachine machine(EightGpus());
  RunResult r = RunGpulane({"run", "-g", "two", "--", "true"}, machine.env());
  EXPECT_TRUE(IsGpulaneError(r, 2, "-g two: give a whole number, e.g. -g 2 (gpulane run --help)")) << r.err;
  r = RunGpulane({"pick", "--gpu-count", "x"}, machine.env());
  EXPECT_TRUE(IsGpulaneError(r, 2, "--gpu-count x: give a whole number, e.g. --gpu-count 2")) << r.err;
  for (const char* command : {"logs", "wait", "show"}) {
    r = RunGpulane({command}, machine.env());
    EXPECT_TRUE(IsGpulaneError(r, 2, fmt::format("gpulane {0} needs a job id, e.g. gpulane {0} 12", command))) << r.err;
  }
  for (const char* command : {"run", "submit"}) {
    r = RunGpulane({command, "--help"}, machine.env());
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(Contains(r.out, fmt::format("gpulane {} [OPTIONS] [-- COMMAND [ARGS...]]", command))) << r.out;
  }
}

TEST(CliEdges, SlurmsTimeOptionPointsToTimeLimit) {
  TestDaemon d;
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"submit", "--time", "1h", "--", "true"},
           {"submit", "-t", "60", "--", "true"},
           {"submit", "--time=1h", "--", "true"},
           {"submit", "--time", "1h", "true"},
           {"run", "--time", "1h", "--", "true"},
           {"run", "-t", "60", "--", "true"}}) {
    RunResult r = d.Gpulane(args);
    EXPECT_TRUE(IsGpulaneError(r, 2, "did you mean --time-limit?")) << args[0] << " " << args[1] << ": " << r.err;
  }
  EXPECT_TRUE(d.Queue({"--all"}).empty()) << "nothing was queued";
}

// ---- durations --------------------------------------------------------------------------------

// `--time-limit 90` was taken as 90 seconds; Slurm users mean 90 minutes. Sizes already refused
// bare numbers; durations do too now, with the unit the option most likely means.
TEST(CliEdges, ABareDurationIsRefusedWithTheLikelyUnit) {
  TestDaemon d;
  const fs::path mark = d.work() / "ran";
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {{"run", "--time-limit", "90", "--", "touch", mark.string()}, "--time-limit: '90' has no unit: did you mean 90m?"},
           {{"submit", "--time-limit", "90", "--", "touch", mark.string()}, "--time-limit: '90' has no unit: did you mean 90m?"},
           {{"run", "--timeout", "30", "--", "touch", mark.string()}, "--timeout: '30' has no unit: did you mean 30m?"},
           {{"run", "--kill-grace", "10", "--", "touch", mark.string()}, "--kill-grace: '10' has no unit: did you mean 10s?"},
           {{"submit", "--kill-grace", "10", "--", "touch", mark.string()}, "did you mean 10s?"},
           {{"run", "--time-limit", "1h30", "--", "touch", mark.string()}, "did you mean 1h30m?"},
           {{"events", "--since", "24"}, "--since: '24' has no unit: did you mean 24h?"},
           {{"report", "--since", "24"}, "--since: '24' has no unit: did you mean 24h?"}}) {
    RunResult r = d.Gpulane(c.args);
    EXPECT_TRUE(IsGpulaneError(r, 2, c.says)) << c.args[0] << " " << c.args[1] << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists(mark)) << "no command ran";
  EXPECT_TRUE(d.Queue({"--all"}).empty()) << "nothing was queued";
  // With a unit (and 0, the same in every unit) it is taken.
  RunResult ok = d.Gpulane({"run", "--time-limit", "90m", "--kill-grace", "0", "--", "touch", mark.string()});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_TRUE(fs::exists(mark));
}

// ---- what is not known -------------------------------------------------------------------------

// `report` without a daemon said "(no finished job in this period)" right after six `gpulane run`
// jobs had finished: nothing records usage then, which is not the same as no job. And `events`
// with a daemon and no anomaly printed nothing at all.
TEST(CliEdges, ReportWithoutADaemonSaysNothingIsKnownAndEventsSaysWhenThereIsNone) {
  FakeMachine machine(IdleMachine(1));
  ASSERT_EQ(RunGpulane({"run", "--", "true"}, machine.env()).exit_code, 0);
  const RunResult text = RunGpulane({"report", "--by", "job"}, machine.env());
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_FALSE(Contains(text.out, "no finished job")) << text.out;
  EXPECT_TRUE(Contains(text.out, "(no daemon runs: usage is recorded only while one runs")) << text.out;
  const RunResult as_json = RunGpulane({"report", "--json"}, machine.env());
  EXPECT_TRUE(Contains(as_json.out, "\"daemon_running\": false")) << as_json.out;
  const RunResult csv = RunGpulane({"report", "--csv"}, machine.env());
  EXPECT_TRUE(Contains(csv.err, "no daemon runs")) << csv.err;
  DaemonOptions options;
  options.config = "[telemetry]\ninterval = \"100ms\"\n";
  TestDaemon d(options);
  const RunResult events = d.Gpulane({"events"});
  EXPECT_EQ(events.exit_code, 0) << events.err;
  EXPECT_TRUE(Contains(events.out, "(no anomaly since ")) << events.out;
  EXPECT_TRUE(Contains(d.Gpulane({"report", "--json"}).out, "\"daemon_running\": true"));
}

// ---- a command that cannot run ----------------------------------------------------------------

// `run -- nonexistent-cmd` waited for its GPUs (here: forever, GPU 1 is busy) before exiting 127.
TEST(CliEdges, RunRefusesACommandThatCannotRunBeforeWaitingForGpus) {
  Child outsider = StartProcess({"/bin/sleep", "120"});
  FakeMachine machine(RecordedH200x2(static_cast<std::uint32_t>(outsider.pid())));  // GPU 1 in use
  const fs::path script = machine.dir() / "not-executable.sh";
  std::ofstream(script) << "#!/bin/sh\necho ran\n";
  chmod(script.c_str(), 0644);
  struct Case {
    std::vector<std::string> command;
    int exit_code;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {{"gpulane-no-such-command-xyz"}, 127, "cannot run 'gpulane-no-such-command-xyz': not found in PATH"},
           {{(machine.dir() / "missing").string()}, 127, "no such file"},
           {{script.string()}, 126, "not an executable file"},
           {{machine.dir().string()}, 126, "not an executable file"}}) {
    std::vector<std::string> argv = {GpulaneBinary(), "run", "-g", "2", "--"};
    argv.insert(argv.end(), c.command.begin(), c.command.end());
    Child run(argv, machine.env());
    auto r = run.Wait(20);
    ASSERT_TRUE(r) << c.command[0] << ": still waiting for GPUs after 20 s: " << run.ErrSoFar();
    EXPECT_EQ(r->exit_code, c.exit_code) << r->err;
    EXPECT_EQ(LineCount(r->err), 1) << r->err;
    EXPECT_TRUE(Contains(r->err, "gpulane: error: cannot run '")) << r->err;
    EXPECT_TRUE(Contains(r->err, c.says)) << r->err;
    EXPECT_EQ(r->out, "");
  }
}

// `submit` checks the command as the submitting user, in the job's PATH and directory, before it
// is queued; a job that follows another (which may build its program) is not checked.
TEST(CliEdges, SubmitRefusesACommandThatCannotRunBeforeItIsQueued) {
  TestDaemon d;
  RunResult r = d.Gpulane({"submit", "--", "gpulane-no-such-command-xyz", "--lr", "3"});
  EXPECT_TRUE(IsGpulaneError(r, 127, "cannot run 'gpulane-no-such-command-xyz': not found in PATH")) << r.err;
  EXPECT_TRUE(Contains(r.err, "nothing was queued")) << r.err;
  r = d.Gpulane({"submit", "--", "./train.sh"});
  EXPECT_TRUE(IsGpulaneError(r, 127, "cannot run './train.sh': no such file (in " + d.work().string() + ")")) << r.err;
  EXPECT_TRUE(d.Queue({"--all"}).empty()) << "nothing was queued";
  // Found in the PATH the job will have (the submitting shell's), relative to its directory.
  const fs::path bin = d.work() / "bin";
  fs::create_directories(bin);
  std::ofstream(bin / "mytool") << "#!/bin/sh\necho mytool ran\n";
  chmod((bin / "mytool").c_str(), 0755);
  const std::int64_t ok = d.Submit({"--", "mytool"}, {{"PATH", bin.string() + ":/usr/bin:/bin"}});
  ASSERT_GT(ok, 0);
  EXPECT_EQ(d.Gpulane({"wait", Id(ok)}).exit_code, 0);
  // --after: the job it follows may build the program; it is queued, and fails alone if still missing.
  const std::int64_t later = d.Submit({"--after", Id(ok), "--", "./built-later.sh"});
  EXPECT_GT(later, 0);
}

}  // namespace
}  // namespace gpulane::test
