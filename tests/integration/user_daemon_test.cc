// A personal queue that tells the truth and resumes by itself (issue 24, part 3), as a user meets
// it: a per-user daemon killed (-9), or gone with a reboot (daemon and supervisors), is started
// again by the next command about jobs, which then finds them, and the queue runs on; `gpulane
// daemon status`, `daemon stop` and `daemon --user --install`; each user's dashboard on a port of
// its own, printed where they look.
//
// The figures (kill -9 / reboot to the next queued job running, one `gpulane queue` right after) are
// printed by:
//   build/tests/integration_tests --gtest_filter='UserDaemon.*Figure*'
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <regex>

#include "support/daemon_fixture.h"
#include "support/http_client.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<std::string> UserDaemonArgs(std::vector<std::string> head, const std::vector<std::string>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

double EpochS() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

// When job `id` wrote its start mark into `log` (epoch seconds), waiting up to `timeout_s` for it.
std::optional<double> StartOf(const fs::path& log, std::int64_t id, double timeout_s = 60) {
  std::optional<double> at;
  Eventually(
      [&] {
        for (const Mark& m : ReadMarks(log))
          if (m.kind == "start" && m.id == id) at = m.time;
        return at.has_value();
      },
      timeout_s);
  return at;
}

// Whether the queue table `table` has a row for job `id` (its first column) saying `state`.
bool HasRow(const std::string& table, std::int64_t id, const std::string& state) {
  for (const auto& line : Lines(table)) {
    const auto first = line.find_first_not_of(' ');
    if (first != std::string::npos && line.compare(first, Id(id).size() + 1, Id(id) + " ") == 0 && Contains(line, state))
      return true;
  }
  return false;
}

constexpr const char* kRestarted = "your gpulane daemon was not running; started it again";

// ---- a killed per-user daemon -------------------------------------------------------------------

// kill -9 of the daemon with one job running and one queued behind it (--after: only a daemon
// starts it): `gpulane queue` starts the daemon again and lists both, `show` finds the queued one,
// and once the first ends the second runs, with no other command.
TEST(UserDaemon, QueueAfterKill9OfThePerUserDaemonStartsItAgainListsTheJobsAndTheQueueResumes) {
  TestDaemon d;
  const fs::path log = d.work() / "marks", gate = d.work() / "gate";
  const std::int64_t first = d.Submit(UserDaemonArgs({"-g", "2", "--"}, MarkedJob(log.string(), gate.string())));
  ASSERT_TRUE(d.WaitForState(first, "running"));
  const std::int64_t second = d.Submit(UserDaemonArgs({"-g", "2", "--after", Id(first), "--"}, MarkedJob(log.string())));
  ASSERT_GT(second, 0);
  const pid_t before = d.pid();
  d.Kill9();

  RunResult queue = d.Gpulane({"queue"});
  EXPECT_EQ(queue.exit_code, 0) << queue.err;
  EXPECT_TRUE(HasRow(queue.out, first, "running")) << queue.out;
  EXPECT_TRUE(HasRow(queue.out, second, "")) << queue.out;
  EXPECT_TRUE(Contains(queue.err, kRestarted)) << queue.err;
  EXPECT_TRUE(Contains(queue.err, "2 of the 2 jobs")) << queue.err;
  EXPECT_EQ(LineCount(queue.err), 1) << queue.err;
  const json pong = d.Call({{"op", "ping"}});
  EXPECT_EQ(pong.value("mode", ""), "user");
  EXPECT_NE(pong.value("pid", -1), before);
  EXPECT_EQ(d.UserDaemonPids().size(), 1u);

  RunResult show = d.Gpulane({"show", Id(second)});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_EQ(show.err, "") << "the daemon runs again: no second start";
  EXPECT_TRUE(Contains(show.out, Id(second))) << show.out;

  Touch(gate);
  EXPECT_TRUE(StartOf(log, second)) << "the queued job never started";
  RunResult wait = d.Gpulane({"wait", Id(first), Id(second)});
  EXPECT_EQ(wait.out, fmt::format("{} completed 0\n{} completed 0\n", first, second)) << wait.err;
}

// Every command about jobs finds them with the daemon killed: show, logs, queue, hold, cancel,
// release and wait each start it again (one at a time, each after a kill -9).
TEST(UserDaemon, NoCommandSaysAJobOfAKilledPerUserDaemonDoesNotExist) {
  TestDaemon d;
  const std::int64_t id = d.Submit({"--hold", "--", "true"});
  ASSERT_GT(id, 0);
  for (std::vector<std::string> args : {std::vector<std::string>{"show", Id(id)}, {"logs", Id(id)}, {"queue", "--json"},
                                        {"hold", Id(id)}, {"cancel", Id(id)}, {"release", Id(id)}, {"wait", Id(id)}}) {
    d.Kill9();
    for (pid_t pid : d.UserDaemonPids()) kill(pid, SIGKILL);
    ASSERT_TRUE(Eventually([&] { return d.UserDaemonPids().empty(); }, 10));
    RunResult r = d.Gpulane(args);
    const std::string what = "gpulane " + args.front() + ": exit " + std::to_string(r.exit_code) + ": " + r.err;
    EXPECT_FALSE(Contains(r.err, "no gpulane daemon is running")) << what;
    EXPECT_TRUE(Contains(r.err, kRestarted)) << what;
    EXPECT_FALSE(Contains(r.err, "no job " + Id(id))) << what;
    if (args.front() == "queue") {
      const json jobs = json::parse(r.out, nullptr, false);
      EXPECT_TRUE(jobs.is_array() && jobs.size() == 1 && jobs[0]["id"] == id) << r.out;
    }
    if (args.front() == "wait") {
      EXPECT_EQ(r.out, fmt::format("{} cancelled\n", id)) << what;
    }
  }
}

// A per-user state without jobs is not a reason to start a daemon: nothing is started, and `queue`
// is truly empty.
TEST(UserDaemon, AnEmptyStateStartsNoDaemon) {
  TestDaemon d({.start = false});
  RunResult queue = d.Gpulane({"queue", "--json"});
  EXPECT_EQ(queue.out, "[]\n");
  EXPECT_EQ(queue.err, "");
  EXPECT_TRUE(d.UserDaemonPids().empty());
  EXPECT_FALSE(fs::exists(d.state_dir() / "daemon.log"));
}

// A job store the daemon cannot open: the command starts it, and says why it did not come up (the
// daemon's own words), instead of an empty queue.
TEST(UserDaemon, AStateTheDaemonCannotOpenIsNamedNotShownAsAnEmptyQueue) {
  TestDaemon d;
  ASSERT_GT(d.Submit({"--hold", "--", "true"}), 0);
  d.Kill9();
  for (const char* part : {"jobs.db-wal", "jobs.db-shm"}) fs::remove(d.state_dir() / part);
  {
    std::ofstream damaged(d.state_dir() / "jobs.db", std::ios::trunc);
    damaged << "this is not a database";
  }
  RunResult queue = d.Gpulane({"queue"});
  EXPECT_EQ(queue.exit_code, 10) << queue.out << queue.err;
  EXPECT_EQ(queue.out, "");
  EXPECT_TRUE(Contains(queue.err, "one could not be started")) << queue.err;
  EXPECT_TRUE(Contains(queue.err, "jobs.db")) << queue.err;
}

// The figures: kill -9 of the daemon (or a reboot: daemon, supervisors and jobs gone) with a job
// queued, then one `gpulane queue` at once; how long until the queued job runs.
double KillThenOneQueue(bool reboot) {
  TestDaemon d;
  const fs::path log = d.work() / "marks", gate = d.work() / "gate";
  const std::int64_t first = d.Submit(UserDaemonArgs({"-g", "2", "--"}, MarkedJob(log.string(), gate.string())));
  EXPECT_TRUE(d.WaitForState(first, "running"));
  // Queued behind it: after a crash it waits for the first (--after: for the daemon); after a
  // reboot the first is gone, and the second waits for nothing but a daemon.
  const std::int64_t second = d.Submit(
      UserDaemonArgs(reboot ? std::vector<std::string>{"-g", "2", "--"} : std::vector<std::string>{"-g", "2", "--after", Id(first), "--"},
           MarkedJob(log.string())));
  EXPECT_TRUE(d.Barrier());
  const double killed_s = EpochS();
  d.Kill9();
  if (reboot) {
    for (pid_t pid : d.SupervisorPids()) kill(pid, SIGKILL);
    for (pid_t pid : d.JobPids()) kill(pid, SIGKILL);
    EXPECT_TRUE(Eventually([&] { return d.SupervisorPids().empty() && d.JobPids().empty(); }, 10));
  } else {
    Touch(gate);
  }
  RunResult queue = d.Gpulane({"queue"});
  EXPECT_EQ(queue.exit_code, 0) << queue.err;
  EXPECT_TRUE(Contains(queue.err, kRestarted)) << queue.err;
  const auto started = StartOf(log, second);
  EXPECT_TRUE(started) << "the queued job did not start: " << d.Gpulane({"show", Id(second)}).out;
  return started ? *started - killed_s : -1;
}

TEST(UserDaemon, FigureKill9ToTheQueueRunningAgainWithOneQueueCommand) {
  const double s = KillThenOneQueue(false);
  ASSERT_GT(s, 0);
  std::printf("[  FIGURE  ] kill -9 of the per-user daemon -> next queued job running (one `gpulane queue`): %.3f s\n", s);
}

TEST(UserDaemon, FigureRebootToTheQueueRunningAgainWithOneQueueCommand) {
  const double s = KillThenOneQueue(true);
  ASSERT_GT(s, 0);
  std::printf("[  FIGURE  ] reboot (daemon, supervisors, jobs killed) -> next queued job running (one `gpulane queue`): %.3f s\n", s);
}

// ---- daemon status and stop ---------------------------------------------------------------------

TEST(UserDaemon, DaemonStatusSaysRunningWithPidAndSocketThenStopStopsItAndJobsGoOn) {
  TestDaemon d;
  const fs::path log = d.work() / "marks", gate = d.work() / "gate";
  const std::int64_t running = d.Submit(UserDaemonArgs({"-g", "1", "--"}, MarkedJob(log.string(), gate.string())));
  ASSERT_TRUE(d.WaitForState(running, "running"));
  const std::int64_t held = d.Submit({"--hold", "--", "true"});
  ASSERT_GT(held, 0);

  RunResult status = d.Gpulane({"daemon", "status"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_TRUE(Contains(status.out, fmt::format("gpulane daemon: running (user mode), pid {}\n", d.pid()))) << status.out;
  EXPECT_TRUE(Contains(status.out, "socket:    " + d.socket() + "\n")) << status.out;
  EXPECT_TRUE(Contains(status.out, "(2 unfinished, 2 jobs in all)")) << status.out;
  EXPECT_TRUE(Contains(status.out, "dashboard: off")) << status.out;

  const pid_t pid = d.pid();
  RunResult stop = d.Gpulane({"daemon", "stop"});
  EXPECT_EQ(stop.exit_code, 0) << stop.err;
  EXPECT_EQ(stop.out, fmt::format("stopped your gpulane daemon (pid {}); running jobs go on under their supervisors, queued "
                                  "ones wait: the next gpulane command about jobs starts it again\n", pid));
  EXPECT_EQ(d.WaitForExit(0), 0) << "it had ended (cleanly) when stop returned";
  EXPECT_FALSE(RawConnection(d.socket()).connected());
  EXPECT_EQ(d.SupervisorPids().size(), 1u) << "the running job's supervisor goes on";

  RunResult down = d.Gpulane({"daemon", "status"});
  EXPECT_EQ(down.exit_code, 10) << down.err;
  EXPECT_TRUE(Contains(down.out, "gpulane daemon: not running (nothing answers on " + d.socket() + ")")) << down.out;
  EXPECT_TRUE(Contains(down.out, "(2 unfinished, 2 jobs in all)")) << down.out;
  EXPECT_TRUE(d.UserDaemonPids().empty()) << "status starts nothing";
  RunResult again = d.Gpulane({"daemon", "stop"});
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_EQ(again.out, "your gpulane daemon is not running\n");

  Touch(gate);
  ASSERT_TRUE(Eventually([&] { return CountMarks(ReadMarks(log), "end", running) == 1; }, 30)) << "the job ran on to its end";
  RunResult wait = d.Gpulane({"wait", Id(running)});  // starts the daemon again: it collects the end
  EXPECT_EQ(wait.out, fmt::format("{} completed 0\n", running)) << wait.err;
}

// With no job in its state, a stopped daemon is not started again by `queue` (StartWhenStateHasJobs):
// `daemon stop` says that only submit starts it, and that is what happens.
TEST(UserDaemon, DaemonStopWithNoJobsSaysOnlySubmitStartsItAgain) {
  TestDaemon d;
  const pid_t pid = d.pid();
  RunResult stop = d.Gpulane({"daemon", "stop"});
  EXPECT_EQ(stop.exit_code, 0) << stop.err;
  EXPECT_EQ(stop.out, fmt::format("stopped your gpulane daemon (pid {}); its state holds no jobs, so only gpulane "
                                  "submit starts it again (no other command does)\n", pid));
  EXPECT_EQ(d.WaitForExit(0), 0);
  RunResult queue = d.Gpulane({"queue"});
  EXPECT_EQ(queue.exit_code, 0) << queue.err;
  EXPECT_TRUE(d.UserDaemonPids().empty()) << "queue started it: " << queue.err;
  EXPECT_GT(d.Submit({"-g", "0", "--", "true"}), 0) << "submit starts it";
  EXPECT_FALSE(d.UserDaemonPids().empty());
}

TEST(UserDaemon, DaemonStopOfTheSystemDaemonSaysToUseSystemctlAndLeavesItRunning) {
  TestDaemon d({.system_mode = true});
  RunResult stop = d.Gpulane({"daemon", "stop"});
  EXPECT_TRUE(IsGpulaneError(stop, 2, "systemctl stop gpulane")) << stop.err;
  EXPECT_TRUE(d.Barrier());
  RunResult status = d.Gpulane({"daemon", "status"});
  EXPECT_EQ(status.exit_code, 0);
  EXPECT_TRUE(Contains(status.out, "running (system mode)")) << status.out;
}

// ---- the systemd user unit ----------------------------------------------------------------------

// The value of `key=` in unit text `unit` ("" when absent); each line once.
std::vector<std::string> UnitValues(const std::string& unit, const std::string& key) {
  std::vector<std::string> out;
  for (const auto& line : Lines(unit))
    if (line.rfind(key + "=", 0) == 0) out.push_back(line.substr(key.size() + 1));
  return out;
}

TEST(UserDaemon, InstallWritesAUserUnitThatStartsThisBinaryAsThePerUserDaemon) {
  TestDaemon d({.start = false});
  const fs::path config_home = d.dir() / "xdg-config";
  RunResult r = d.Gpulane({"daemon", "--user", "--install"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path unit_path = config_home / "systemd" / "user" / "gpulane.service";
  EXPECT_TRUE(Contains(r.out, "wrote " + unit_path.string() + "\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "  systemctl --user enable --now gpulane\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "  loginctl enable-linger ")) << r.out;
  const std::string unit = ReadFile(unit_path);
  ASSERT_FALSE(unit.empty()) << unit_path;
  const auto exec = UnitValues(unit, "ExecStart");
  ASSERT_EQ(exec.size(), 1u) << unit;
  EXPECT_EQ(exec[0], "\"" + fs::canonical(GpulaneBinary()).string() + "\" daemon --user") << unit;
  EXPECT_EQ(UnitValues(unit, "KillMode"), std::vector<std::string>{"process"}) << "stopping it must spare the jobs";
  EXPECT_EQ(UnitValues(unit, "Restart"), std::vector<std::string>{"on-failure"});
  EXPECT_EQ(UnitValues(unit, "WantedBy"), std::vector<std::string>{"default.target"});
  // The places this shell's commands look are pinned, so systemd's daemon is the one they find.
  const auto pinned = UnitValues(unit, "Environment");
  // The lease directory above all: with another one, the unit's daemon would hand this shell's
  // `gpulane run` GPUs to its own jobs too (a new user's unit had none pinned).
  const Env shell = d.env();
  for (const std::string& kv : {"GPULANE_SOCKET=" + d.socket(), "GPULANE_STATE_DIR=" + d.state_dir().string(),
                                "GPULANE_LEASE_DIR=" + shell.at("GPULANE_LEASE_DIR"), "FAKE_NVML_STATE=" + shell.at("FAKE_NVML_STATE")})
    EXPECT_NE(std::find(pinned.begin(), pinned.end(), "\"" + kv + "\""), pinned.end()) << unit;
  EXPECT_FALSE(Contains(r.out, "this shell has no XDG_RUNTIME_DIR")) << "its socket is pinned: " << r.out;

  // What systemd would run, run here: the unit's command with the unit's environment (and only
  // what a user manager gives: no variable of this shell's) answers as this user's daemon on this
  // shell's socket.
  Env env;
  for (const char* name : {"PATH", "HOME"})
    if (const char* v = std::getenv(name)) env[name] = v;
  for (const auto& kv : pinned) {
    const std::string inner = kv.substr(1, kv.size() - 2);
    env[inner.substr(0, inner.find('='))] = inner.substr(inner.find('=') + 1);
  }
  Child daemon({fs::canonical(GpulaneBinary()).string(), "daemon", "--user"}, env);
  ASSERT_TRUE(Eventually([&] { return d.Gpulane({"daemon", "status"}).exit_code == 0; }, 30)) << daemon.ErrSoFar();
  EXPECT_TRUE(Contains(d.Gpulane({"daemon", "status"}).out, fmt::format("pid {}", daemon.pid())));
  daemon.Kill(SIGTERM);
  EXPECT_TRUE(daemon.Wait(30));
}

TEST(UserDaemon, InstallIsRefusedWhereASystemDaemonServesAndWithoutUser) {
  TestDaemon d({.system_mode = true, .start = false});
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"daemon", "--user", "--install"}), 2, "a system daemon serves this machine"));
  EXPECT_TRUE(IsGpulaneError(d.Gpulane({"daemon", "--install"}), 2, "--install needs --user"));
  EXPECT_FALSE(fs::exists(d.dir() / "xdg-config" / "systemd"));
}

// ---- each user's dashboard on a port of its own -------------------------------------------------

// The URL `gpulane daemon status` prints for the dashboard, once it listens ("" when it does not).
std::string DashboardOf(const TestDaemon& d, const TestUser& user, const Env& env) {
  std::string url;
  Eventually(
      [&] {
        std::smatch m;
        const std::string out = d.GpulaneAs(user, {"daemon", "status"}, env).out;
        if (std::regex_search(out, m, std::regex("dashboard: (http://127\\.0\\.0\\.1:[0-9]+/)\n"))) url = m[1];
        return !url.empty();
      },
      30);
  return url;
}

TEST(UserDaemon, TwoUsersPerUserDaemonsServeTheirDashboardsOnPortsOfTheirOwn) {
  TestUser a, b;
  if (auto why = TwoTestUsers(&a, &b)) GTEST_SKIP() << *why;
  // Opened folders (as for a system daemon) so that both users reach the fake machine; no web.listen
  // anywhere: the per-user default.
  TestDaemon d({.system_mode = true, .config = "[web]\nshow_commands = false\n", .start = false});
  std::map<std::string, std::string> url;
  for (const TestUser* u : {&a, &b}) {
    const fs::path home = d.UserDir(*u);
    const Env env = {{"GPULANE_SYSTEM_DAEMON", "0"},
                     {"GPULANE_SOCKET", (home / "gpulane.sock").string()},
                     {"GPULANE_STATE_DIR", (home / "state").string()}};
    RunResult submit = d.GpulaneAs(*u, {"submit", "--hold", "--name", u->name + "-job", "--", "true"}, env);
    ASSERT_EQ(submit.exit_code, 0) << submit.err;
    url[u->name] = DashboardOf(d, *u, env);
    ASSERT_FALSE(url[u->name].empty()) << u->name << ": " << d.GpulaneAs(*u, {"daemon", "status"}, env).out
                                       << ReadFile(home / "state" / "daemon.log");
    // `gpulane status` prints the same URL.
    EXPECT_TRUE(Contains(d.GpulaneAs(*u, {"status"}, env).out, "dashboard: " + url[u->name] + "\n"));
  }
  EXPECT_NE(url[a.name], url[b.name]);
  for (const TestUser* u : {&a, &b}) {
    EXPECT_FALSE(Contains(url[u->name], ":9470/")) << "a per-user daemon never takes the system daemon's port";
    const int port = std::stoi(url[u->name].substr(std::string("http://127.0.0.1:").size()));
    HttpResponse queue = HttpGet(port, "/api/v1/queue");
    ASSERT_EQ(queue.status, 200) << queue.error;
    json jobs = json::parse(queue.body, nullptr, false)["jobs"];
    ASSERT_EQ(jobs.size(), 1u) << queue.body;
    EXPECT_EQ(jobs[0].value("user", ""), u->name) << "each user's URL shows their own queue";
    EXPECT_EQ(jobs[0].value("name", ""), u->name + "-job");
  }
  for (const TestUser* u : {&a, &b})
    for (const std::string& log : {ReadFile(d.UserDir(*u) / "state" / "daemon.log")})
      EXPECT_FALSE(Contains(log, "cannot listen")) << u->name << ": " << log;
}

}  // namespace
}  // namespace gpulane::test
