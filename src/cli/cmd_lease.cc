// gpulane _lease: holds GPUs for the process that started it (the Python package's lease(), issue
// 13), in the same line as `gpulane run`: it waits, takes a lease whose "pid" is its parent (so the
// parent and its children are the job: lease/occupancy.h AnchorOf), prints one JSON line on stdout
//   {"gpus": [0], "uuids": ["GPU-..."], "job_id": "p4121", "lease": "<file name>",
//    "env": {"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "GPULANE_JOB_ID": ..., ...}}
// and holds the lease until its stdin ends (the parent closed it, or died), a stop signal comes, or
// the parent process dies (not when only the parent's thread that started it ends), or its time
// limit (--time-limit, else limits.default_time_limit) is over: then it stops the parent (SIGTERM,
// run.kill_grace, SIGKILL), says so on stderr and exits 6.
// Waiting status lines go to stderr. Errors as `gpulane run`'s (exit codes of README's table).
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <fstream>
#include <iterator>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/request_options.h"
#include "exec/job_env.h"
#include "gpu/visible_devices.h"
#include "lease/waiter.h"
#include "util/config.h"
#include "util/exit_codes.h"
#include "util/strings.h"
#include "util/terminal_text.h"
#include "util/units.h"

namespace gpulane::cli {
namespace {

struct LeaseOptions {
  RequestOptions request;
  std::string timeout;
  bool no_wait = false, uuid = false, quiet = false;
};

// The parent-death signal. PR_SET_PDEATHSIG fires when the *thread* that started this process
// ends, not the process: a program that leases from a worker thread (a thread pool, a notebook
// helper) would lose its GPUs when that thread ends while it goes on using them. So the signal is
// one of its own, and means "look whether the parent process is gone" (getppid() changes once it
// is: a thread's children pass to another thread of the same process, keeping the parent's pid).
constexpr int kParentDeathSignal = SIGUSR2;

bool ParentGone(pid_t parent) { return getppid() != parent; }

// Blocks until fd 0 ends (EOF, a hang-up), a stop signal of `stops` comes (signalfd), or the
// parent process is gone; or, with a time limit `limit_s`, until that is over: then the job (the
// parent) is stopped as `gpulane run` stops its job, SIGTERM and SIGKILL `kill_grace_s` later
// (returns true).
bool HoldUntilReleased(sigset_t stops, pid_t parent, std::optional<double> limit_s, double kill_grace_s) {
  sigaddset(&stops, kParentDeathSignal);
  const int signals = signalfd(-1, &stops, SFD_CLOEXEC);
  const auto start = std::chrono::steady_clock::now();
  auto elapsed_s = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::optional<double> termed_at_s;
  char buf[256];
  while (true) {
    int timeout_ms = -1;
    if (limit_s) {
      const double next_s = termed_at_s ? *termed_at_s + kill_grace_s : *limit_s;
      if (elapsed_s() >= next_s) {
        if (ParentGone(parent)) return true;
        if (termed_at_s) {
          kill(parent, SIGKILL);
          return true;
        }
        kill(parent, SIGTERM);
        termed_at_s = elapsed_s();
        continue;
      }
      timeout_ms = static_cast<int>(std::ceil((next_s - elapsed_s()) * 1000));
    }
    pollfd fds[2] = {{0, POLLIN, 0}, {signals, POLLIN, 0}};
    if (poll(fds, signals >= 0 ? 2 : 1, timeout_ms) <= 0) continue;
    if (signals >= 0 && (fds[1].revents & POLLIN)) {
      signalfd_siginfo info{};
      if (read(signals, &info, sizeof info) != sizeof info) continue;
      if (static_cast<int>(info.ssi_signo) != kParentDeathSignal || ParentGone(parent)) return termed_at_s.has_value();
      continue;  // only a thread of the parent ended
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      if (read(0, buf, sizeof buf) <= 0) return termed_at_s.has_value();  // the parent closed its end, or is gone
    }
  }
}

// What `gpulane _lease` with `o` waits for, for the process `parent`, under `config`. Errors:
// kInvalidArgument (a bad option).
Result<lease::WaitRequest> WaitRequestOf(const LeaseOptions& o, const Config& config, pid_t parent) {
  auto request = o.request.ToRequest();
  if (!request) return request.error();
  lease::WaitRequest w;
  w.request = std::move(request).value();
  if (!o.timeout.empty()) {
    auto s = ParseDurationS(o.timeout, "m");
    if (!s) return MakeError(ErrorKind::kInvalidArgument, "--timeout: " + s.error().message);
    w.timeout_s = *s;
  }
  w.no_wait = o.no_wait;
  w.quiet = o.quiet;
  w.lease_pid = parent;
  w.extra_signals = {kParentDeathSignal};
  lease::ApplyConfig(config, w);
  w.inherited = InheritedAllocation();
  if (const char* job = std::getenv("GPULANE_JOB_ID")) w.parent_job_id = job;
  return w;
}

int RunLease(const LeaseOptions& o, const os::Env& os_env) {
  // The parent is the job: if it dies, so does this hold (stdin's end usually says so first).
  const pid_t parent = getppid();
  sigset_t death;
  sigemptyset(&death);
  sigaddset(&death, kParentDeathSignal);
  sigprocmask(SIG_BLOCK, &death, nullptr);  // taken through signalfd only: while waiting and while held
  prctl(PR_SET_PDEATHSIG, kParentDeathSignal);
  if (ParentGone(parent)) return 0;
  auto config = LoadConfig();
  if (!config) return Fail(config.error());
  auto wait = WaitRequestOf(o, *config, parent);
  if (!wait) return Fail(wait.error());
  const lease::WaitRequest& w = *wait;
  auto backend = OpenBackend(os_env);
  if (!backend) return Fail(backend.error());
  auto dir = lease::LeaseDir::Open(lease::LeaseDir::DefaultPath(config->lease_dir), os_env.clock);
  if (!dir) return Fail(dir.error());
  sigset_t stops;
  sigemptyset(&stops);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stops, sig);
  sigprocmask(SIG_BLOCK, &stops, nullptr);
  const std::string job_id = fmt::format("p{}", parent);
  // The lease file is world-readable: it names the program that holds the lease, never its
  // arguments (docs/security.md, "Privacy").
  std::string label = fmt::format("pid {}", parent);
  {
    std::ifstream in(fmt::format("/proc/{}/cmdline", parent), std::ios::binary);
    std::string argv0;
    std::getline(in, argv0, '\0');
    if (!Trim(argv0).empty()) label = EscapeForTerminal(lease::ProgramLabel({std::string(Trim(argv0))}));
  }
  lease::PollWaitEnv wait_env(os_env.clock);
  const auto say = [&o](const std::string& line) {
    if (!o.quiet && !line.empty()) fmt::print(stderr, "gpulane: {}\n", EscapeForTerminal(line));
  };
  lease::LeaseWaiter waiter(**backend, *dir, w, job_id, label, say, wait_env, os_env.processes);
  if (Status joined = waiter.JoinLine(); !joined.ok()) return Fail(joined.error());
  auto grant = waiter.Acquire();
  // A thread of the parent ended while this waited: keep its place in line (the ticket stays held;
  // a --timeout counts again from here).
  while (grant && grant->interrupted_by_signal == kParentDeathSignal && !ParentGone(parent)) grant = waiter.Acquire();
  if (!grant) return Fail(grant.error());
  if (grant->interrupted_by_signal) return 128 + grant->interrupted_by_signal;
  std::vector<std::string> vars = exec::JobEnvironment({}, grant->snapshot, grant->gpus, o.uuid || w.inherited.in_slurm(), job_id,
                                                      w.request.mem_bytes, grant->lease.fd(), grant->mig_uuid);
  nlohmann::json env = nlohmann::json::object();
  for (const std::string& v : vars) {
    const auto eq = v.find('=');
    const std::string key = v.substr(0, eq);
    if (key == "GPULANE_LEASE_FD") continue;  // this process's descriptor, not the parent's
    env[key] = v.substr(eq + 1);
  }
  nlohmann::json uuids = nlohmann::json::array();
  for (unsigned i : grant->gpus) uuids.push_back(grant->mig_uuid.value_or(grant->snapshot.devices[i].uuid));
  const nlohmann::json line = {
      {"gpus", grant->gpus}, {"uuids", uuids}, {"job_id", job_id}, {"lease", grant->lease.name()}, {"env", env}};
  fmt::print("{}\n", line.dump());
  std::fflush(stdout);
  // The time limit (--time-limit, else the owner's limits.default_time_limit): this side stops
  // the job at it; the daemon does too should this process be stopped or killed
  // (daemon/time_limit_watch.h).
  if (HoldUntilReleased(stops, parent, w.request.time_limit_s, config->kill_grace_s)) {
    fmt::print(stderr, "gpulane: the lease's time limit of {} is over: its process (pid {}) was stopped\n",
               FormatSeconds(*w.request.time_limit_s), parent);
    return kExitTimeout;
  }
  return kExitOk;  // the lease ends with `grant`
}

}  // namespace

void RegisterLease(CLI::App& app, Runner* run, const os::Env& env) {
  auto o = std::make_shared<LeaseOptions>();
  CLI::App* sub = app.add_subcommand("_lease", "Hold GPUs for the process that started this one (the Python package's "
                                               "lease()): one JSON line on stdout, held until stdin ends");
  sub->group("");  // internal: not listed in --help
  // --time-limit (else limits.default_time_limit): the parent is stopped when it is over.
  o->request.Register(sub, {/*time_limit=*/true, /*priority=*/false});
  sub->add_option("--timeout", o->timeout, "Give up waiting after this long (exit 6)")->type_name("DURATION");
  sub->add_flag("--no-wait", o->no_wait, "Fail at once (exit 5) when the GPUs are not free now");
  sub->add_flag("--uuid", o->uuid, "GPU UUIDs in CUDA_VISIBLE_DEVICES instead of indices");
  sub->add_flag("-q,--quiet", o->quiet, "No waiting status on stderr");
  sub->callback([o, run, &env] { *run = [o, &env] { return RunLease(*o, env); }; });
}

}  // namespace gpulane::cli
