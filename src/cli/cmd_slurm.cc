// gpulane slurm gres-conf | prolog | epilog: gpulane as the GPU guard of a Slurm node (issue 12,
// item 4; docs/slurm.md).
//   gres-conf  prints this node's gres.conf lines from NVML (gpu/gres_conf.h)
//   prolog     (Slurm's Prolog=, as root) refuses to start a job on a GPU of its allocation that a
//              process or unaccounted memory already holds: exit 17, so Slurm drains the node and
//              requeues the job
//   epilog     (Epilog=) ends the processes of the job's user still on the job's GPUs (SIGTERM,
//              --grace, SIGKILL), then waits up to --settle for their memory to be freed; exit 17
//              when a process or ghost memory still holds one of the GPUs, so Slurm drains the node
// The job's GPUs: SLURM_JOB_GPUS (the indices of gres.conf's lines: PCI order when gpulane wrote
// it), else CUDA_VISIBLE_DEVICES; its user: SLURM_JOB_UID. One line per finding on stdout.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/common.h"
#include "exec/gpu_cleanup.h"
#include "gpu/gres_conf.h"
#include "util/config.h"
#include "util/exit_codes.h"
#include "util/strings.h"
#include "util/terminal_text.h"
#include "util/units.h"

namespace gpulane::cli {
namespace {

struct SlurmOptions {
  double grace_s = 10;
  double settle_s = 10;
  std::string ghost_min;
};

// NVML itself (os::Env's GPUs), not a daemon's snapshots.
Result<GpuSnapshot> ReadNvml(const os::Env& env) {
  auto backend = env.gpus.Open();
  if (!backend) return backend.error();
  return ReadAnnotated(**backend);
}

// The job's GPUs as indices of `snapshot` (PCI order): SLURM_JOB_GPUS ("0,2"), else
// CUDA_VISIBLE_DEVICES (indices or UUIDs). Errors: kInvalidArgument naming the variable.
Result<std::vector<unsigned>> JobGpus(const GpuSnapshot& snapshot) {
  const char* name = "SLURM_JOB_GPUS";
  const char* value = std::getenv(name);
  if (!value || !*value) name = "CUDA_VISIBLE_DEVICES", value = std::getenv(name);
  if (!value || !*value)
    return MakeError(ErrorKind::kInvalidArgument, "neither SLURM_JOB_GPUS nor CUDA_VISIBLE_DEVICES is set: run this as "
                                                  "Slurm's Prolog= or Epilog= (slurmd sets them), or set one by hand");
  std::vector<unsigned> gpus;
  for (const std::string& word : Split(value, ',')) {
    const std::string item(Trim(word));
    std::optional<unsigned> found;
    for (const GpuDevice& d : snapshot.devices)
      if (item == std::to_string(d.pci_index) || (!d.uuid.empty() && item == d.uuid)) found = d.pci_index;
    if (!found)
      return MakeError(ErrorKind::kInvalidArgument, fmt::format("{}={}: '{}' names no GPU of this node (indices 0-{} in PCI "
                                                                "order, or UUIDs)",
                                                                name, value, item, snapshot.devices.size() - 1));
    gpus.push_back(*found);
  }
  return gpus;
}

std::string IndexList(const std::vector<unsigned>& gpus) {
  std::vector<std::string> words;
  for (unsigned i : gpus) words.push_back(std::to_string(i));
  return Join(words, ",");
}

std::optional<std::uint32_t> JobUid() {
  const char* v = std::getenv("SLURM_JOB_UID");
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  const unsigned long uid = std::strtoul(v, &end, 10);
  if (*end) return std::nullopt;
  return static_cast<std::uint32_t>(uid);
}

std::string JobName() {
  const char* id = std::getenv("SLURM_JOB_ID");
  return id && *id ? fmt::format("job {}", id) : std::string("the job");
}

std::string Describe(const GpuProcess& p) {
  std::string who = p.user ? fmt::format("{}'s {}", *p.user, p.command.value_or("process"))
                           : std::string("a process of another PID namespace");
  std::string text = fmt::format("{} (pid {}", who, p.pid);
  if (p.used_memory_bytes) text += ", " + FormatBytes(*p.used_memory_bytes);
  return EscapeForTerminal(text + ")");
}

// Memory in use that no live listed process accounts for (`gone`: pids known to have ended, which
// NVML may still list); nullopt when NVML does not report it.
std::optional<std::uint64_t> GhostBytes(const GpuDevice& d, const std::set<std::uint32_t>& gone) {
  if (!d.memory_used_bytes || !d.processes) return std::nullopt;
  std::uint64_t listed = 0;
  for (const GpuProcess& p : *d.processes)
    if (!gone.count(p.pid)) listed += p.used_memory_bytes.value_or(0);
  return *d.memory_used_bytes > listed ? *d.memory_used_bytes - listed : 0;
}

Result<std::uint64_t> GhostMin(const SlurmOptions& o) {
  if (o.ghost_min.empty()) {
    auto config = LoadConfig();
    if (!config) return config.error();
    return config->anomaly_ghost_min_bytes;
  }
  auto bytes = ParseSizeBytes(o.ghost_min);
  if (!bytes) return MakeError(ErrorKind::kInvalidArgument, "--ghost-min: " + bytes.error().message);
  return *bytes;
}

// What holds GPU `i` that should not: a line per process and for ghost memory over `ghost_min`.
// `ignore`: pids not to count (they are gone: NVML may list an ended process a moment longer).
std::vector<std::string> Holders(const GpuDevice& d, std::uint64_t ghost_min, const std::set<std::uint32_t>& ignore) {
  std::vector<std::string> lines;
  if (!d.processes) {
    lines.push_back(fmt::format("GPU {}: NVML does not list its processes: cannot tell whether it is free", d.pci_index));
    return lines;
  }
  for (const GpuProcess& p : *d.processes)
    if (!ignore.count(p.pid)) lines.push_back(fmt::format("GPU {}: held by {}", d.pci_index, Describe(p)));
  if (auto ghost = GhostBytes(d, ignore); ghost && *ghost >= ghost_min)
    lines.push_back(fmt::format("GPU {}: {} in use that no process accounts for (ghost memory): reset the GPU once it is "
                                "idle, or reboot",
                                d.pci_index, FormatBytes(*ghost)));
  return lines;
}

int RunGresConf(const os::Env& env) {
  auto snapshot = ReadNvml(env);
  if (!snapshot) return Fail(snapshot.error());
  auto lines = GresConfLines(*snapshot);
  if (!lines) return Fail(lines.error());
  fmt::print("{}", *lines);
  return kExitOk;
}

// What the prolog and the epilog start from: the threshold, NVML now, the job's GPUs.
struct JobView {
  std::uint64_t ghost_min = 0;
  GpuSnapshot snapshot;
  std::vector<unsigned> gpus;
};

Result<JobView> ViewJob(const SlurmOptions& o, const os::Env& env) {
  JobView v;
  auto ghost_min = GhostMin(o);
  if (!ghost_min) return ghost_min.error();
  v.ghost_min = *ghost_min;
  auto snapshot = ReadNvml(env);
  if (!snapshot) return snapshot.error();
  v.snapshot = std::move(snapshot).value();
  auto gpus = JobGpus(v.snapshot);
  if (!gpus) return gpus.error();
  v.gpus = std::move(gpus).value();
  return v;
}

int RunProlog(const SlurmOptions& o, const os::Env& env) {
  auto job = ViewJob(o, env);
  if (!job) return Fail(job.error());
  int held = 0;
  for (unsigned i : job->gpus)
    for (const std::string& line : Holders(job->snapshot.devices[i], job->ghost_min, {})) {
      fmt::print("{}: refusing to start {} on it\n", line, JobName());
      ++held;
    }
  if (held == 0) fmt::print("GPUs {} are free for {}\n", IndexList(job->gpus), JobName());
  return held ? kExitGpuHeld : kExitOk;
}

int RunEpilog(const SlurmOptions& o, const os::Env& env) {
  auto job = ViewJob(o, env);
  if (!job) return Fail(job.error());
  const std::optional<std::uint32_t> uid = JobUid();
  std::vector<pid_t> leftovers;
  for (unsigned i : job->gpus)
    for (const GpuProcess& p : job->snapshot.devices[i].processes.value_or(std::vector<GpuProcess>{})) {
      if (!p.uid) continue;                // not visible here: cannot be signalled (reported below if it stays)
      if (uid && *p.uid != *uid) continue;  // another user's: not this job's to end
      fmt::print("GPU {}: ending {}, left by {}\n", i, Describe(p), JobName());
      leftovers.push_back(static_cast<pid_t>(p.pid));
    }
  const exec::EndedProcesses ended = exec::EndProcesses(leftovers, o.grace_s, env.clock);
  for (pid_t p : ended.on_kill) fmt::print("pid {} needed SIGKILL after {} s\n", p, o.grace_s);
  std::set<std::uint32_t> gone(ended.on_term.begin(), ended.on_term.end());
  gone.insert(ended.on_kill.begin(), ended.on_kill.end());
  gone.insert(ended.gone.begin(), ended.gone.end());
  // The driver frees an ended process's memory a moment later: look again until nothing holds the
  // GPUs or --settle passes.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(o.settle_s);
  std::vector<std::string> holders;
  while (true) {
    holders.clear();
    for (unsigned i : job->gpus)
      for (const std::string& line : Holders(job->snapshot.devices[i], job->ghost_min, gone)) holders.push_back(line);
    if (holders.empty() || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto again = ReadNvml(env);
    if (!again) return Fail(again.error());
    job->snapshot = std::move(again).value();
  }
  for (const std::string& line : holders) fmt::print("{}: still held after {}\n", line, JobName());
  if (holders.empty()) fmt::print("GPUs {} are free after {}\n", IndexList(job->gpus), JobName());
  return holders.empty() ? kExitOk : kExitGpuHeld;
}

}  // namespace

void RegisterSlurm(CLI::App& app, Runner* run, const os::Env& env) {
  auto o = std::make_shared<SlurmOptions>();
  CLI::App* slurm = app.add_subcommand("slurm", "For Slurm GPU nodes: gres.conf lines, and a prolog and an epilog that "
                                                "guard the job's GPUs (docs/slurm.md)");
  slurm->require_subcommand(1);
  CLI::App* gres = slurm->add_subcommand("gres-conf", "Print this node's gres.conf lines from NVML (PCI order, File= by minor number)");
  gres->callback([run, &env] { *run = [&env] { return RunGresConf(env); }; });
  CLI::App* prolog = slurm->add_subcommand(
      "prolog", "Slurm Prolog=: exit 17 when a process or ghost memory already holds one of the job's GPUs");
  CLI::App* epilog = slurm->add_subcommand(
      "epilog", "Slurm Epilog=: end what the job left on its GPUs; exit 17 when a GPU stays held (Slurm drains the node)");
  for (CLI::App* sub : {prolog, epilog})
    sub->add_option("--ghost-min", o->ghost_min, "Unaccounted memory that counts as held (default: anomaly.ghost_min, 2GiB)")
        ->type_name("SIZE");
  epilog->add_option("--grace", o->grace_s, "Seconds between SIGTERM and SIGKILL (default 10)")->check(CLI::Range(0.0, 3600.0));
  epilog->add_option("--settle", o->settle_s, "Seconds to wait for the driver to free the memory (default 10)")
      ->check(CLI::Range(0.0, 600.0));
  prolog->callback([o, run, &env] { *run = [o, &env] { return RunProlog(*o, env); }; });
  epilog->callback([o, run, &env] { *run = [o, &env] { return RunEpilog(*o, env); }; });
}

}  // namespace gpulane::cli
