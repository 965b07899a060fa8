#include "cli/common.h"
#include "cli/commands.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fmt/format.h>

#include "util/exit_codes.h"
#include "daemon/paths.h"
#include "proto/snapshot_source.h"
#include "lease/lease_dir.h"
#include "os/process_table.h"
#include "proto/wire.h"
#include "store/job_id.h"
#include "util/clock.h"
#include "util/config.h"
#include "util/strings.h"
#include "util/terminal_text.h"

namespace gpulane::cli {

void PrintDiagnostic(std::string_view level, std::string_view message) {
  fmt::print(stderr, "gpulane: {}: {}\n", level, EscapeForTerminal(message));
}

int Fail(const Error& error) {
  PrintDiagnostic("error", error.message);
  return ExitCodeFor(error.kind);
}

void Warn(const std::string& message) { PrintDiagnostic("warning", message); }

Result<std::unique_ptr<GpuBackend>> OpenBackend(const os::Env& env) {
  return std::unique_ptr<GpuBackend>(new proto::SnapshotSource(daemon::SnapshotSockets(), env.clock, env.gpus));
}

std::optional<lease::LeaseRecord> LiveRunLease(std::string_view id) {
  if (!store::IsRunId(id)) return std::nullopt;
  const std::string pid(id.substr(1));
  const SystemClock clock{};  // orders tickets only, unread here
  lease::DirContents contents = ReadLeaseDirIfPresent(clock);
  for (auto& lease : contents.leases) {
    if (!lease.unreadable.empty() || lease.job_id != id) continue;
    // Its lock is held by that very process (the kernel's word, /proc/locks), not only named so
    // by the file's owner: never "kill 1234" for a pid that is no gpulane run. Where /proc/locks
    // names no holder (another PID namespace's lock), the live lease's own pid is all there is.
    const pid_t holder = lease.holder ? lease.holder : lease.pid;
    if (std::to_string(holder) == pid) return std::move(lease);
  }
  return std::nullopt;
}

Error RunIdError(std::string_view id) {
  const std::string_view pid = id.substr(1);
  if (auto run = LiveRunLease(id))
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("job id '{}': a `gpulane run` ({}'s process {}), not a queued job: stop it with Ctrl-C "
                                 "where it runs, or kill {}",
                                 id, run->user, pid, pid));
  return MakeError(ErrorKind::kNotFound,
                   fmt::format("no running gpulane run {}: no live lease of process {} (`gpulane status` lists the runs "
                               "that hold GPUs, `gpulane report --by job` the ended ones)",
                               id, pid));
}

Result<std::vector<std::string>> JobIdArgs(const std::vector<std::string>& words) {
  std::vector<std::string> ids;
  for (const auto& word : words) {
    auto split = store::SplitJobIds(word);
    if (split.empty()) return store::ParseJobRefs(word).error();  // "" or blanks
    for (auto& id : split) {
      if (store::IsRunId(id)) return RunIdError(id);
      if (auto refs = store::ParseJobRefs(id); !refs) return refs.error();
      ids.push_back(std::move(id));
    }
  }
  return ids;
}

int ReportFailures(const nlohmann::json& reply) {
  const bool nothing_done = !reply.value("ok", false);
  const nlohmann::json failed = reply.value("failed", nlohmann::json::array());
  if (failed.empty()) {
    if (!nothing_done) return kExitOk;
    return Fail(MakeError(proto::KindFromName(reply.value("code", "internal")), reply.value("error", "the daemon refused")));
  }
  for (const auto& f : failed) {
    const std::string line = f.value("error", "failed");
    PrintDiagnostic(nothing_done ? "error" : "warning", line);
  }
  return ExitCodeFor(proto::KindFromName(failed.front().value("code", "internal")));
}


Result<GpuSnapshot> ReadAnnotated(GpuBackend& backend, const ReadOptions& options) {
  auto snapshot = backend.Read(options);
  if (!snapshot) return snapshot;
  ProcfsProcessTable table;
  AnnotateProcesses(*snapshot, table);
  return snapshot;
}

std::optional<std::string> EnvironmentValue(const char* name) {
  const char* value = std::getenv(name);
  if (!value) return std::nullopt;
  return std::string(value);
}

std::optional<std::string> InheritedVisibleDevices() { return EnvironmentValue("CUDA_VISIBLE_DEVICES"); }

InheritedGpus InheritedAllocation() { return InheritedGpusFrom(EnvironmentValue); }

namespace {

// True if a CUDA_VISIBLE_DEVICES value names a GPU by index (whose meaning depends on CUDA's order).
bool HasIndexEntry(const std::string& value) {
  for (const auto& entry : Split(value, ',')) {
    unsigned long long n = 0;
    if (ParseUint(Trim(entry), &n)) return true;
  }
  return false;
}

bool MixedModels(const GpuSnapshot& snapshot) {
  std::optional<std::string> model;
  for (const auto& d : snapshot.devices) {
    if (d.failed() || !d.name) continue;
    if (model && *model != *d.name) return true;
    model = d.name;
  }
  return false;
}

bool CudaOrderIsPciBus() {
  const char* order = std::getenv("CUDA_DEVICE_ORDER");
  return order && std::string(order) == "PCI_BUS_ID";
}

bool order_warned = false;

}  // namespace

void WarnIfCudaOrderDiffers(const GpuSnapshot& snapshot) {
  if (order_warned || CudaOrderIsPciBus() || !MixedModels(snapshot)) return;
  order_warned = true;
  Warn("the GPUs here are of different models and CUDA_DEVICE_ORDER is not PCI_BUS_ID: CUDA numbers them fastest "
       "first, so a GPU index gpulane prints (PCI bus order) may name another card; use "
       "eval \"$(gpulane pick --export)\", set CUDA_DEVICE_ORDER=PCI_BUS_ID, or --uuid");
}

VisibleDevices AllowedGpus(const GpuSnapshot& snapshot) {
  const InheritedGpus allocation = InheritedAllocation();
  const auto& inherited = allocation.cuda_visible_devices;
  VisibleDevices visible = ParseInheritedGpus(allocation, snapshot);
  if (visible.ended_by)
    Warn(inherited ? fmt::format("CUDA_VISIBLE_DEVICES='{}': {}", *inherited, *visible.ended_by) : *visible.ended_by);
  if (inherited && HasIndexEntry(*inherited) && !order_warned && !CudaOrderIsPciBus() && MixedModels(snapshot)) {
    order_warned = true;
    Warn("CUDA_VISIBLE_DEVICES holds indices but CUDA_DEVICE_ORDER is not PCI_BUS_ID and the GPUs differ: "
         "gpulane reads the indices in PCI bus order; set CUDA_DEVICE_ORDER=PCI_BUS_ID or use UUIDs");
  }
  return visible;
}

bool UseColor(const std::string& mode) {
  if (mode == "always") return true;
  if (mode == "never") return false;
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color && *no_color) return false;
  return isatty(STDOUT_FILENO) == 1;
}

lease::DirContents ReadLeaseDirIfPresent(const gpulane::Clock& clock) {
  auto config = LoadConfig();
  const std::string path = lease::LeaseDir::DefaultPath(config ? config->lease_dir : "");
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return {};  // nothing leased yet; never create it here
  auto dir = lease::LeaseDir::Open(path, clock);
  if (!dir) return {};
  return dir->Read();
}

std::map<std::string, std::string> LeaseHolders(const std::vector<lease::LeaseRecord>& leases, const GpuSnapshot& snapshot) {
  std::map<std::string, std::string> holders;
  for (const auto& lease : leases) {
    const std::string who = lease.unreadable.empty()
                                ? fmt::format("job {} ({})", lease::JobText(lease), lease.user)
                                : fmt::format("held by an unreadable lease ({}: {})", lease.user, lease.unreadable);
    std::vector<std::string> uuids;
    for (const auto& gpu : lease.gpus) uuids.push_back(gpu.uuid);
    if (lease.every_gpu)
      for (const GpuDevice& d : snapshot.devices) {
        uuids.push_back(d.uuid);
        for (const MigDevice& m : d.mig_devices) uuids.push_back(m.uuid);
      }
    for (const auto& uuid : uuids) {
      std::string& text = holders[uuid];
      text += (text.empty() ? "" : ", ") + who;
    }
  }
  return holders;
}

std::vector<std::string>& TrailingCommand() {
  static std::vector<std::string> words;
  return words;
}

bool& TrailingCommandGiven() {
  static bool given = false;
  return given;
}

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

Result<NotifyTarget> NotifyTargetOf(const std::string& events, const Config& config) {
  auto parsed = ParseNotifyEvents(events);
  if (!parsed) return parsed.error();
  NotifyTarget target;
  target.events = std::move(parsed).value();
  target.webhook = config.notify_webhook;
  target.format = config.notify_format;
  target.command = config.notify_command;
  if (target.empty())
    return MakeError(ErrorKind::kInvalidArgument,
                     fmt::format("--notify {}: nowhere to send it: set notify.webhook (an http(s) URL) and/or notify.command "
                                 "in ~/.config/gpulane/config.toml ([notify] table)",
                                 events));
  return target;
}

}  // namespace gpulane::cli
