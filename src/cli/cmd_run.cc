// gpulane run: wait for suitable GPUs, lease them, run the command on them, clean up, give them back.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fmt/format.h>
#include <memory>

#include "util/timing.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "util/exit_codes.h"
#include "exec/command_check.h"
#include "exec/job_env.h"
#include "exec/job_runner.h"
#include "exec/leased_job.h"
#include "proto/call.h"
#include "proto/telemetry_json.h"
#include "telemetry/job_usage.h"
#include "cli/request_options.h"
#include "cli/run_each.h"
#include "cli/suggest.h"
#include "daemon/job_notify.h"
#include "daemon/paths.h"
#include "gpu/visible_devices.h"
#include "lease/waiter.h"
#include "util/config.h"
#include "util/strings.h"
#include "util/terminal_text.h"
#include "util/shell_words.h"
#include "util/units.h"

namespace gpulane::cli {
namespace {

struct RunOptions {
  RequestOptions request;
  std::string timeout, kill_grace, notify, each;
  int jobs = 0;  ///< --each's -j (0: DefaultParallel)
  bool no_wait = false, uuid = false, quiet = false;
  // Given on the command line: an empty value ("--timeout ''") is an error, not "not given".
  bool timeout_given = false, kill_grace_given = false, each_given = false, jobs_given = false;
  std::vector<std::string> command;
};

// Parses everything that does not need the GPUs; errors are usage errors (exit 2).
Result<lease::WaitRequest> ParseRequest(const RunOptions& o, const Config& config, double* kill_grace_s) {
  lease::WaitRequest w;
  auto usage = [](std::string m) { return MakeError(ErrorKind::kInvalidArgument, std::move(m)); };
  if (o.command.empty()) return usage("no command given: put it after the options, e.g. gpulane run -g 1 -- python train.py");
  auto request = o.request.ToRequest();
  if (!request) return request.error();
  w.request = std::move(request).value();
  if (o.timeout_given) {
    auto s = ParseDurationS(o.timeout, "m");
    if (!s) return usage("--timeout: " + s.error().message);
    w.timeout_s = *s;
  }
  *kill_grace_s = config.kill_grace_s;
  if (o.kill_grace_given) {
    auto s = ParseDurationS(o.kill_grace);
    if (!s) return usage("--kill-grace: " + s.error().message);
    *kill_grace_s = *s;
  }
  w.no_wait = o.no_wait;
  w.quiet = o.quiet;
  lease::ApplyConfig(config, w);
  w.inherited = InheritedAllocation();
  return w;
}

// The job as the lifecycle runs it: the request, the command and its environment, the checks
// while it runs. Errors: ParseRequest's.
Result<exec::LeasedJob> MakeRunJob(const RunOptions& o, const Config& config) {
  exec::LeasedJob job;
  auto request = ParseRequest(o, config, &job.job.kill_grace_s);
  if (!request) return request.error();
  job.wait = std::move(request).value();
  job.wait.parent_job_id = EnvironmentValue("GPULANE_JOB_ID");  // a step of a pipeline run as a gpulane job
  job.job_id = fmt::format("r{}", getpid());
  job.job.argv = o.command;
  job.job.time_limit_s = job.wait.request.time_limit_s;
  job.job.env = exec::CurrentEnvironment();
  // Inside a Slurm job CUDA may see only the allocation (ConstrainDevices), where node-wide indices
  // would name other GPUs: UUIDs mean the same GPU either way.
  job.uuids_in_env = o.uuid || job.wait.inherited.in_slurm();
  job.stray_check_s = config.stray_check_s;
  job.memory_guard = {config.memory_margin_bytes, config.anomaly_overuse_grace_s};
  job.isolation = exec::IsolationOf(config);
  return job;
}

// --notify: end and fail when the job ends, anomalies (the daemon's, by job id) while it runs;
// nullopt without --notify.
Result<std::optional<daemon::NotifiedJob>> NotifiedOfRun(const RunOptions& o, const Config& config, const exec::LeasedJob& job) {
  if (o.notify.empty()) return std::optional<daemon::NotifiedJob>();
  auto target = NotifyTargetOf(o.notify, config);
  if (!target) return target.error();
  daemon::NotifiedJob notified;
  notified.id = job.job_id;
  notified.name = o.command.front();
  notified.user = lease::UserNameOf(getuid());
  notified.env = job.job.env;
  notified.target = std::move(target).value();
  return std::optional<daemon::NotifiedJob>(std::move(notified));
}

// What the user sees while the job waits and starts; with `report_fd` >= 0 (a line of --each)
// "granted <GPU indices>\n" written there instead.
exec::LeasedJobHooks RunHooks(const RunOptions& o, int report_fd) {
  const bool tty = isatty(STDERR_FILENO) == 1;
  exec::LeasedJobHooks hooks;
  // The waiting line names other users' jobs and processes (lease job ids, process names): escaped
  // (util/terminal_text.h), so that only our own "erase the line" code reaches the terminal.
  hooks.on_waiting = [tty, report_fd](const std::string& line) {
    if (report_fd >= 0) return;  // a line of --each: its progress line says it waits
    if (tty) fmt::print(stderr, "\r\x1b[K{}", line.empty() ? "" : "gpulane: " + EscapeForTerminal(line));
    else if (!line.empty()) fmt::print(stderr, "gpulane: {}\n", EscapeForTerminal(line));
  };
  hooks.on_granted = [quiet = o.quiet, report_fd](const lease::Grant& grant) {
    TimingMark("GPUs leased");
    if (report_fd >= 0) {
      std::vector<unsigned> gpus = grant.gpus;
      std::sort(gpus.begin(), gpus.end());
      std::string line = "granted ";
      for (unsigned i : gpus) line += fmt::format("{}{}", line.size() > 8 ? "," : "", i);
      line += '\n';
      if (write(report_fd, line.data(), line.size()) < 0) {  // the parent is gone: run the line anyway
      }
    }
    if (grant.waited_s >= 1 && !quiet)
      fmt::print(stderr, "gpulane: got GPU{} {} after waiting {}\n", grant.gpus.size() > 1 ? "s" : "",
                 EscapeForTerminal(FormatVisibleDevices(grant.snapshot, grant.gpus, false)), FormatSeconds(grant.waited_s));
    return Status::Ok();
  };
  hooks.on_warning = [](const std::string& line) { Warn(line); };
  return hooks;
}

// The sampling interval of a daemon's sampler that meters the lease directory (then the usage line
// is the daemon's): nullopt when none does; 0 when it does not say (an older daemon).
std::optional<double> DaemonMeteringInterval() {
  for (const auto& socket : daemon::SnapshotSockets())
    if (auto reply = proto::CallExisting(socket, {{"op", "telemetry"}}, 2.0))
      return reply->is_object() && (*reply)["interval_s"].is_number() ? (*reply)["interval_s"].get<double>() : 0.0;
  return std::nullopt;
}

// How the lifecycle went, and whether a daemon metered it.
struct RunLifecycleOutcome {
  exec::LeasedJobOutcome outcome;
  bool daemon_meters = false;  // a -g 0 job holds no GPU to meter
  /// A job that may have been too short for any sample: the daemon's record of it, asked as it
  /// ended, while its lease was still held (EndedInTime).
  std::optional<telemetry::UsageRecord> ended_record;
};

// A job shorter than two of the daemon's sampling intervals may have been seen by no sample: its
// end is told to the daemon while its lease is still held ("ending"), so the daemon records it
// from its lease file and `report` counts it. A round trip more before the GPUs go to the next job,
// paid only by such short jobs; longer ones are asked after the release, as before.
exec::LeasedJobHooks EndedInTime(exec::LeasedJobHooks hooks, double interval_s, std::optional<telemetry::UsageRecord>& record) {
  if (interval_s <= 0) return hooks;
  hooks.on_ended = [then = std::move(hooks.on_ended), interval_s, &record](const exec::LeasedJobOutcome& ended) {
    if (then) then(ended);
    if (ended.job_s < 2 * interval_s && !ended.lease_name.empty())
      record = proto::AskUsage(daemon::SnapshotSockets(), {{"lease", ended.lease_name}, {"ending", true}}, 2.0);
  };
  return hooks;
}

// Runs `job` through the lifecycle: -g 0 without GPU, lease or NVML (it works without a driver);
// else on the GPUs, metering its use itself when no daemon does (and the user sees the line).
Result<RunLifecycleOutcome> RunLifecycle(const RunOptions& o, const os::Env& env, const Config& config, exec::LeasedJob& job,
                                         const exec::LeasedJobHooks& hooks) {
  RunLifecycleOutcome run;
  if (job.wait.request.count == 0) {
    auto outcome = exec::RunWithoutGpus(env, job, hooks);
    if (!outcome) return outcome.error();
    run.outcome = std::move(outcome).value();
    return run;
  }
  auto backend = OpenBackend(env);
  if (!backend) return backend.error();
  auto dir = lease::LeaseDir::Open(lease::LeaseDir::DefaultPath(config.lease_dir), env.clock);
  if (!dir) return dir.error();
  TimingMark("lease directory opened");
  const std::optional<double> interval_s = DaemonMeteringInterval();
  run.daemon_meters = interval_s.has_value();
  if (!run.daemon_meters && !o.quiet) job.meter_usage_s = 1;
  auto outcome = exec::RunLeasedJob(env, **backend, *dir, job, EndedInTime(hooks, interval_s.value_or(0), run.ended_record));
  if (!outcome) return outcome.error();
  run.outcome = std::move(outcome).value();
  return run;
}

// What the user is told once the job ended (and what --notify sends); returns run's exit code.
// `time_limit_s`: the limit the job ran under (its end says so when the limit stopped it, as a queued
// job's log does).
int ReportRunEnd(const RunOptions& o, const os::Env& env, const std::string& job_id, std::optional<double> time_limit_s,
                 const std::optional<daemon::NotifiedJob>& notified, const RunLifecycleOutcome& run) {
  const exec::LeasedJobOutcome& outcome = run.outcome;
  const exec::JobOutcome& ran = *outcome.job;
  if (ran.exec_failed) PrintDiagnostic("error", ran.exec_error);
  if (ran.timed_out && time_limit_s)
    PrintDiagnostic("warning", fmt::format("the job was stopped by its time limit ({}) after {:.1f} s", FormatSeconds(*time_limit_s),
                                           outcome.job_s));
  // Its partition closed (ends = "stop", or "requeue", which `run` cannot do: it stops too).
  if (outcome.partition_stop) PrintDiagnostic("warning", "the job was stopped: " + outcome.partition_stop->reason);
  if (outcome.memory_overuse) PrintDiagnostic("error", "the job was stopped: " + *outcome.memory_overuse);
  if (ran.leftovers_terminated > 0 && !o.quiet)
    fmt::print(stderr, "gpulane: ended {} process{} the job left behind{}\n", ran.leftovers_terminated,
               ran.leftovers_terminated > 1 ? "es" : "",
               ran.leftovers_killed ? fmt::format(" ({} needed SIGKILL)", ran.leftovers_killed) : "");
  // What the daemon's sampler metered of the job (nothing without a daemon); a job shorter than one
  // sample gets the run time and GPU-hours it was recorded with as it ended (no utilisation: unknown).
  if (notified) {
    exec::JobOutcome ended = ran;
    if (outcome.memory_overuse) ended.exit_code = kExitMemoryOveruse;  // what run exits with
    daemon::NotifyJobEnd(env.spawner, *notified, ended, outcome.partition_stop.has_value(),
                         outcome.partition_stop ? outcome.partition_stop->reason : outcome.memory_overuse.value_or(""));
  }
  if (!o.quiet && !ran.exec_failed && outcome.usage && outcome.usage->samples > 0)
    fmt::print(stderr, "gpulane: {}\n", telemetry::UsageLine(job_id, *outcome.usage));
  else if (!o.quiet && !ran.exec_failed && run.ended_record)
    fmt::print(stderr, "gpulane: {}\n", telemetry::UsageLine(job_id, run.ended_record->usage));
  else if (!o.quiet && !ran.exec_failed && run.daemon_meters)
    if (auto record = proto::AskUsage(daemon::SnapshotSockets(), {{"lease", outcome.lease_name}}, 2.0); record && record->usage.samples > 0)
      fmt::print(stderr, "gpulane: {}\n", telemetry::UsageLine(job_id, record->usage));
  if (std::getenv("GPULANE_TIMING"))
    fmt::print(stderr, "gpulane: timing: lease {:.2f} ms, job {:.2f} ms, release after the job's end {:.2f} ms\n",
               outcome.waited_s * 1e3, outcome.job_s * 1e3, outcome.release_s * 1e3);
  return outcome.memory_overuse ? kExitMemoryOveruse : ran.exit_code;
}

// Runs `o.command` through the lease-and-run lifecycle; with `report_fd` >= 0 (a line of --each)
// quietly, writing "granted <GPU indices>\n" there once its GPUs are leased. Returns the exit code.
int RunRun(const RunOptions& o, const os::Env& env, int report_fd = -1) {
  auto config = LoadConfig();
  if (!config) return Fail(config.error());
  TimingMark("config loaded");
  auto job = MakeRunJob(o, *config);
  if (!job) return Fail(job.error());
  // A command that cannot be executed fails now (127 or 126, as a shell's), not after the wait for GPUs.
  char cwd[4096];
  if (auto problem = exec::CheckCommand(o.command.front(), job->job.env, getcwd(cwd, sizeof cwd) ? cwd : "")) {
    PrintDiagnostic("error", problem->message);
    return problem->exit_code;
  }
  auto notified = NotifiedOfRun(o, *config, *job);
  if (!notified) return Fail(notified.error());
  exec::LeasedJobHooks hooks = RunHooks(o, report_fd);
  std::optional<daemon::AnomalyNotifier> anomalies;
  if (*notified && Wants((*notified)->target, "anomaly")) {
    anomalies.emplace(env.spawner, **notified, static_cast<double>(std::time(nullptr)));
    hooks.on_running = [&] { anomalies->Poll(); };
    job->running_hook_s = daemon::kAnomalyPollS;
  }
  auto run = RunLifecycle(o, env, *config, *job, hooks);
  if (!run) return Fail(run.error());
  if (run->outcome.interrupted_by_signal) return 128 + run->outcome.interrupted_by_signal;
  return ReportRunEnd(o, env, job->job_id, job->job.time_limit_s, *notified, *run);
}

// --each FILE: every command line of FILE as a `gpulane run` of its own, at most -j at once.
int RunEachFile(const RunOptions& o, const os::Env& env) {
  auto usage = [](std::string m) { return Fail(MakeError(ErrorKind::kInvalidArgument, std::move(m))); };
  if (!o.command.empty())
    return usage(fmt::format("--each {} gives the commands: leave out the command '{}' after the options",
                             EscapeForTerminal(o.each), EscapeForTerminal(o.command.front().substr(0, 40))));
  if (o.jobs_given && o.jobs < 1) return usage(fmt::format("-j {}: run at least 1 line at once", o.jobs));
  auto commands = ReadCommandFile(o.each);
  if (!commands) return Fail(commands.error());
  auto request = o.request.ToRequest();  // a bad option fails once here, not once per line
  if (!request) return Fail(request.error());
  int exit_code = kExitOk;
  const unsigned parallel = o.jobs_given ? static_cast<unsigned>(o.jobs) : DefaultParallel(*request, env, &exit_code);
  if (parallel == 0) return exit_code;
  return RunEach(*commands, parallel, [&o, &env](const std::vector<std::string>& argv, int report_fd) {
    RunOptions line = o;
    line.command = argv;
    line.quiet = true;
    return RunRun(line, env, report_fd);
  });
}

}  // namespace

void RegisterRun(CLI::App& app, Runner* run, const os::Env& env) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* sub = app.add_subcommand(
      "run", "Wait for free GPUs, lease them, and run a command on them: gpulane run -g 2 -- python train.py");
  o->request.Register(sub, {.time_limit = true, .priority = false, .zero_gpus = true});
  sub->add_flag("--uuid", o->uuid, "Put GPU UUIDs in CUDA_VISIBLE_DEVICES instead of indices");
  sub->add_option("--timeout", o->timeout, "Give up waiting after this long (exit 6), e.g. 30m")->type_name("DURATION");
  sub->add_flag("--no-wait", o->no_wait, "Fail at once (exit 5) when the GPUs are not free now");
  sub->add_option("--kill-grace", o->kill_grace, "Time between SIGTERM and SIGKILL for leftovers (default 10s)")
      ->type_name("DURATION");
  sub->add_flag("-q,--quiet", o->quiet, "No waiting status or clean-up notes on stderr");
  sub->add_option("--each", o->each,
                  "Run every command line of FILE ('-': stdin) like this, each on GPUs of its own, at most -j at once; "
                  "lines are split into words as a shell would but not run through one (sh -c '...' for that); "
                  "exit 0 when every line exited 0, else 15")
      ->type_name("FILE");
  sub->add_option("-j,--jobs", o->jobs, "--each: lines run at once (default: the GPUs divided by -g; -g 0: the CPU cores)")
      ->type_name("N");
  sub->add_option("--notify", o->notify,
                  "Tell me when the job ends, fails or has an anomaly (end, fail, anomaly): to notify.webhook and/or "
                  "notify.command of your config")
      ->type_name("EVENTS");
  sub->prefix_command();
  sub->allow_extras();
  sub->footer("Everything after the first argument that is not an option (or after --) is the command, run as given. "
              "A command that cannot be executed is refused before any wait for GPUs: exit 127 (not found in PATH) "
              "or 126 (not executable).");
  sub->callback([o, sub, run, &env] {
    o->timeout_given = sub->count("--timeout") > 0;
    o->kill_grace_given = sub->count("--kill-grace") > 0;
    o->each_given = sub->count("--each") > 0;
    o->jobs_given = sub->count("--jobs") > 0;
    o->command = sub->remaining();
    // With prefix_command(), CLI11 stops at the first word it does not know, also at an unknown
    // option: that is a usage error, not a command named "--bogus" (a command that starts with '-'
    // goes after --).
    if (!o->command.empty() && o->command.front().size() > 1 && o->command.front()[0] == '-') {
      const std::string message = UnknownOptionMessage(*sub, o->command.front()) +
                                  "; a command that starts with '-' goes after --";
      *run = [message] { return Fail(MakeError(ErrorKind::kInvalidArgument, message)); };
      return;
    }
    if (TrailingCommandGiven()) {
      // "gpulane run python x.py -- --lr 3": the "--" belongs to the command, which started before it.
      if (!o->command.empty()) o->command.push_back("--");
      o->command.insert(o->command.end(), TrailingCommand().begin(), TrailingCommand().end());
    }
    if (o->jobs_given && !o->each_given) {
      *run = [] { return Fail(MakeError(ErrorKind::kInvalidArgument, "-j applies to --each FILE only: give --each")); };
      return;
    }
    if (o->each_given && o->each.empty()) {
      *run = [] { return Fail(MakeError(ErrorKind::kInvalidArgument, "--each '': give a command file")); };
      return;
    }
    *run = [o, &env] { return o->each_given ? RunEachFile(*o, env) : RunRun(*o, env); };
  });
}

}  // namespace gpulane::cli
