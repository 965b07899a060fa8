// Terminal injection (issue 9, item 13), through the real binary: escape sequences that other
// users choose — a job's name and command, a lease's job id, a process's name (prctl, or the name
// it is exec'd by) and command line, NVML's GPU and driver names — never reach a terminal from
// `status`, `queue`, `show`, `pick`, `run` or an error line: they are shown visibly ("\x1b"),
// while the --json outputs keep the exact text.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <fmt/format.h>

#include "support/daemon_fixture.h"
#include "support/harness.h"
#include "support/planted.h"
#include "support/scenarios.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// OSC 52: writes "hi\n" into the terminal's clipboard (the attack of the issue), ended by BEL.
const std::string kOsc52 = "\x1b]52;c;aGkK\x07";
// How gpulane shows it.
const std::string kOsc52Shown = "\\x1b]52;c;aGkK\\x07";

// Whether `text` could make a terminal act: a C0 control other than the line ends gpulane writes,
// DEL, a C1 control (U+0080–U+009F) or bytes that are not UTF-8 (a Latin-1 terminal reads 0x9b as
// CSI). The UTF-8 check is the JSON library's (a strict dump throws on ill-formed UTF-8), not
// gpulane's own.
::testing::AssertionResult TerminalSafe(const std::string& what, const std::string& text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto u = static_cast<unsigned char>(text[i]);
    const bool c1 = u == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) <= 0x9f;
    if ((u < 0x20 && u != '\n') || u == 0x7f || c1)
      return ::testing::AssertionFailure() << what << ": control byte 0x" << std::hex << static_cast<int>(u)
                                           << " at " << std::dec << i << " in: " << json(text).dump(-1, ' ', true, json::error_handler_t::replace);
  }
  try {
    (void)json(text).dump();
  } catch (const json::exception&) {
    return ::testing::AssertionFailure() << what << ": bytes that are not UTF-8 in: "
                                         << json(text).dump(-1, ' ', true, json::error_handler_t::replace);
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult TerminalSafe(const std::string& what, const RunResult& r) {
  auto out = TerminalSafe(what + " (stdout)", r.out);
  if (!out) return out;
  return TerminalSafe(what + " (stderr)", r.err);
}

// A process of the test's user whose argv[0] (which its owner chooses freely) is `argv0`: /proc
// shows `argv0 3600` as its command line and gpulane names it by argv[0]. It has exec'd when the
// constructor returns; it is killed with the test.
class ArgvProcess {
 public:
  explicit ArgvProcess(const std::string& argv0) {
    int sync[2];
    if (pipe2(sync, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      int null = open("/dev/null", O_RDWR);
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
      const char* argv[] = {argv0.c_str(), "3600", nullptr};
      execv("/bin/sleep", const_cast<char* const*>(argv));
      _exit(127);
    }
    close(sync[1]);
    char buf[8];
    while (read(sync[0], buf, sizeof buf) < 0 && errno == EINTR) {
    }
    close(sync[0]);  // end of file: the exec happened (or the child died)
  }
  ~ArgvProcess() { KillAndReap(pid_); }
  ArgvProcess(const ArgvProcess&) = delete;
  ArgvProcess& operator=(const ArgvProcess&) = delete;
  std::uint32_t pid() const { return static_cast<std::uint32_t>(pid_); }

 private:
  pid_t pid_ = -1;
};

// A child that named itself `comm` (prctl PR_SET_NAME, as any process may) and exited, not reaped:
// its command line is empty, so gpulane names it by that name, as a GPU process NVML still lists
// just after it ended.
class NamedZombie {
 public:
  explicit NamedZombie(const std::string& comm) {
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      prctl(PR_SET_NAME, comm.c_str(), 0, 0, 0);
      _exit(0);
    }
    siginfo_t info{};
    while (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
    }
  }
  ~NamedZombie() {
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  NamedZombie(const NamedZombie&) = delete;
  NamedZombie& operator=(const NamedZombie&) = delete;
  std::uint32_t pid() const { return static_cast<std::uint32_t>(pid_); }

 private:
  pid_t pid_ = -1;
};

// ---- status, pick and run on a machine whose names are hostile ---------------------------------

TEST(TerminalInjection, NvmlNamesAndProcessNamesAreEscapedInStatusAndPickAndExactInJson) {
  // A command line: OSC 52, a raw C1 CSI byte (no UTF-8), and CSI as a UTF-8 character (U+009B).
  const std::string argv0 = kOsc52 + "\x9b" "2J" + "\xc2\x9b" "2J";
  const std::string argv0_shown = kOsc52Shown + "\\x9b2J\\u009b2J";
  ArgvProcess process(argv0);
  ASSERT_EQ(ReadFile(fs::path("/proc") / std::to_string(process.pid()) / "cmdline"), argv0 + '\0' + "3600" + '\0');
  // A process name (the kernel keeps 15 bytes): OSC 52 cut short, BEL, and a byte that is no UTF-8.
  const std::string comm = "\x1b]52;c;aGk\x07\xff";
  const std::string comm_shown = "\\x1b]52;c;aGk\\x07\\xff";
  NamedZombie zombie(comm);
  ASSERT_EQ(ReadFile(fs::path("/proc") / std::to_string(zombie.pid()) / "comm"), comm + "\n");

  FakeMachine machine(RecordedH200x2(process.pid()));  // the recorded busy GPU runs `process`
  const std::string gpu_name = "NVIDIA H200 " + kOsc52 + "\xc2\x9b" "31m";
  for (auto& device : machine.state()["devices"]) device["name"] = gpu_name;
  AddProcess(machine.state()["devices"][0], zombie.pid(), 1ULL << 30);
  machine.state()["driver"] = "580.1\x1b[2J";
  machine.Save();

  RunResult status = RunGpulane({"status"}, machine.env());
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_TRUE(TerminalSafe("status", status));
  EXPECT_TRUE(Contains(status.out, "NVIDIA H200 " + kOsc52Shown + "\\u009b31m")) << status.out;
  EXPECT_TRUE(Contains(status.out, "driver 580.1\\x1b[2J")) << status.out;
  EXPECT_TRUE(Contains(status.out, fmt::format("{}/{}", argv0_shown, process.pid()))) << status.out;
  EXPECT_TRUE(Contains(status.out, fmt::format("{}/{}", comm_shown, zombie.pid()))) << status.out;

  RunResult full = RunGpulane({"status", "-p"}, machine.env());
  ASSERT_EQ(full.exit_code, 0) << full.err;
  EXPECT_TRUE(TerminalSafe("status -p", full));
  EXPECT_TRUE(Contains(full.out, argv0_shown + " 3600\n")) << full.out;
  EXPECT_TRUE(Contains(full.out, "[" + comm_shown + "]\n")) << full.out;

  // --json: the exact text where it is text (control characters as JSON's own \u001b escapes);
  // bytes that are no UTF-8 cannot be a JSON string and read as U+FFFD (docs/status-json.md).
  RunResult as_json = RunGpulane({"status", "--json"}, machine.env());
  ASSERT_EQ(as_json.exit_code, 0) << as_json.err;
  EXPECT_TRUE(Contains(as_json.out, "\\u001b]52;c;aGkK\\u0007")) << as_json.out;
  EXPECT_FALSE(Contains(as_json.out, "\x1b"));
  const json doc = json::parse(as_json.out);
  EXPECT_EQ(doc["driver_version"], "580.1\x1b[2J");
  EXPECT_EQ(doc["gpus"][0]["name"], gpu_name);
  std::map<std::uint32_t, json> processes;
  for (const auto& gpu : doc["gpus"])
    for (const auto& p : gpu.value("processes", json::array())) processes[p["pid"].get<std::uint32_t>()] = p;
  const std::string replaced = "\xef\xbf\xbd";  // U+FFFD
  EXPECT_EQ(processes[process.pid()]["command"], kOsc52 + replaced + "2J" + "\xc2\x9b" "2J") << as_json.out;
  EXPECT_EQ(processes[process.pid()]["cmdline"], kOsc52 + replaced + "2J" + "\xc2\x9b" "2J 3600");
  EXPECT_EQ(processes[zombie.pid()]["command"], "\x1b]52;c;aGk\x07" + replaced) << as_json.out;

  // pick's reasons name the processes on the GPUs it cannot give.
  RunResult pick = RunGpulane({"pick", "-g", "2"}, machine.env());
  EXPECT_NE(pick.exit_code, 0);
  EXPECT_TRUE(TerminalSafe("pick", pick));
  EXPECT_TRUE(Contains(pick.err, "root's " + argv0_shown + " (pid")) << pick.err;
}

TEST(TerminalInjection, LeaseJobIdIsEscapedInStatusPickAndRunAndExactInJson) {
  FakeMachine machine(RecordedH200x2(UnusedPid()));
  JobTree tree;
  const std::string job_id = "r1" + kOsc52 + "\xc2\x9b" "2J";
  json gpus = json::array();
  for (const auto& d : machine.state()["devices"]) gpus.push_back({{"uuid", d["uuid"]}});
  PlantedFile lease = PlantLease(machine.dir() / "leases", {{"job_id", job_id},
                                                            {"pid", tree.supervisor()},
                                                            {"pgid", tree.child()},
                                                            {"command", "sleep"},
                                                            {"gpus", gpus},
                                                            {"started_s", 1.7e9}});
  const std::string shown = "r1" + kOsc52Shown + "\\u009b2J";

  RunResult status = RunGpulane({"status"}, machine.env());
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_TRUE(TerminalSafe("status", status));
  EXPECT_TRUE(Contains(status.out, "[job " + shown + " (")) << status.out;

  RunResult as_json = RunGpulane({"status", "--json"}, machine.env());
  ASSERT_EQ(as_json.exit_code, 0) << as_json.err;
  const std::string held_by = json::parse(as_json.out)["gpus"][0].value("held_by", "");
  EXPECT_EQ(held_by.rfind("job " + job_id + " (", 0), 0u) << held_by;

  RunResult pick = RunGpulane({"pick"}, machine.env());
  EXPECT_NE(pick.exit_code, 0);
  EXPECT_TRUE(TerminalSafe("pick", pick));
  EXPECT_TRUE(Contains(pick.err, "(job " + shown + ")")) << pick.err;

  RunResult run = RunGpulane({"run", "--no-wait", "--", "true"}, machine.env());
  EXPECT_NE(run.exit_code, 0);
  EXPECT_TRUE(TerminalSafe("run --no-wait", run));
  EXPECT_TRUE(Contains(run.err, "(job " + shown + ")")) << run.err;

  // A run that waits says why on stderr (the waiting line), then gives up.
  RunResult waiting = RunGpulane({"run", "--timeout", "0.3s", "--", "true"}, machine.env());
  EXPECT_NE(waiting.exit_code, 0);
  EXPECT_TRUE(TerminalSafe("run (waiting)", waiting));
  EXPECT_TRUE(Contains(waiting.err, "(job " + shown + ")")) << waiting.err;
}

// ---- queue and show through the daemon --------------------------------------------------------

TEST(TerminalInjection, JobNameCommandAndReasonAreEscapedInQueueAndShowAndExactInJson) {
  TestDaemon d;
  const std::string name = "train" + kOsc52;
  // A command that cannot run: its reason ("cannot run '...'") quotes it.
  const std::string command = "/nonexistent/" + kOsc52 + "\xc2\x9b" "2J";
  // Submit refuses a command it cannot find, except behind a dependency (which may build it).
  const std::int64_t before = d.Submit({"--name", name, "--", "true"});
  const std::int64_t failed =
      d.Submit({"--name", name, "--after-any", std::to_string(before), "--", command, "arg\x1b[2J"});
  ASSERT_GT(failed, 0);
  ASSERT_EQ(d.Gpulane({"wait", std::to_string(failed)}).exit_code, 127);
  const std::int64_t held = d.Submit({"--hold", "--name", name, "--", "true"});
  ASSERT_GT(held, 0);

  RunResult queue = d.Gpulane({"queue", "-a"});
  ASSERT_EQ(queue.exit_code, 0) << queue.err;
  EXPECT_TRUE(TerminalSafe("queue", queue));
  EXPECT_TRUE(Contains(queue.out, "\\x1b]52")) << queue.out;  // the name, cut to its column
  EXPECT_TRUE(Contains(queue.out, "cannot run '/nonexistent/" + kOsc52Shown + "\\u009b2J'")) << queue.out;

  RunResult show = d.Gpulane({"show", std::to_string(failed)});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_TRUE(TerminalSafe("show", show));
  EXPECT_TRUE(Contains(show.out, "  name      train" + kOsc52Shown + "\n")) << show.out;
  EXPECT_TRUE(Contains(show.out, "  command   '/nonexistent/" + kOsc52Shown + "\\u009b2J' 'arg\\x1b[2J'\n")) << show.out;

  // JSON: the exact name and argv, written with JSON's own escapes, by the daemon's writer
  // (queue) and the JSON library (show).
  RunResult queue_json = d.Gpulane({"queue", "-a", "--json"});
  ASSERT_EQ(queue_json.exit_code, 0) << queue_json.err;
  EXPECT_TRUE(Contains(queue_json.out, "\"train\\u001b]52;c;aGkK\\u0007\"")) << queue_json.out;
  EXPECT_FALSE(Contains(queue_json.out, "\x1b"));
  int seen = 0;
  for (const auto& job : json::parse(queue_json.out)) {
    EXPECT_EQ(job["spec"]["name"], name);
    if (job["id"] == failed) {
      EXPECT_EQ(job["spec"]["argv"], json::array({command, "arg\x1b[2J"}));
      ++seen;
    }
  }
  EXPECT_EQ(seen, 1);
  RunResult show_json = d.Gpulane({"show", "--json", std::to_string(failed)});
  ASSERT_EQ(show_json.exit_code, 0) << show_json.err;
  const json shown = json::parse(show_json.out);
  EXPECT_EQ(shown["spec"]["name"], name);
  EXPECT_EQ(shown["spec"]["argv"], json::array({command, "arg\x1b[2J"}));
}

TEST(TerminalInjection, ErrorLinesQuotingWhatTheUserGaveAreEscaped) {
  TestDaemon d;
  // Refused by the CLI's own parser of job ids.
  RunResult bad_id = d.Gpulane({"show", "12" + kOsc52});
  EXPECT_TRUE(IsGpulaneError(bad_id, 2, "12" + kOsc52Shown)) << bad_id.err;
  EXPECT_TRUE(TerminalSafe("show <bad id>", bad_id));
  // Refused by the daemon, whose message quotes the name.
  RunResult none = d.Gpulane({"cancel", "--name", "nothing" + kOsc52});
  EXPECT_NE(none.exit_code, 0);
  EXPECT_TRUE(TerminalSafe("cancel --name", none));
  EXPECT_TRUE(Contains(none.err, "nothing" + kOsc52Shown)) << none.err;
  // Refused by the command-line parser (CLI11), which quotes the unknown option.
  RunResult parse = d.Gpulane({"queue", "--bad" + kOsc52});
  EXPECT_TRUE(IsGpulaneError(parse, 2, "--bad" + kOsc52Shown)) << parse.err;
  EXPECT_TRUE(TerminalSafe("queue --bad", parse));
}

}  // namespace
}  // namespace gpulane::test
