// gpulane doctor: checks the setup a user or admin would otherwise debug by hand and prints one
// line per check on stdout, "ok", "warn" or "FAIL", then what was found and, unless ok, the fix:
//   ok    config: parsed
//   ok    nvml: driver 580.95.05, NVML 13.580.95.05, CUDA 13.0, 8 GPUs
//   FAIL  lease directory /run/gpulane/leases: ... (the check's error names the fix)
// Exit 0 when nothing failed (warnings included), 16 when a check failed (README, "Exit codes").
#include <pwd.h>
#include <sys/stat.h>
#include <sys/timex.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "exec/device_isolation.h"
#include "daemon/paths.h"
#include "lease/lease_dir.h"
#include "store/job_counts.h"
#include "util/config.h"
#include "util/exit_codes.h"
#include "util/strings.h"
#include "util/terminal_text.h"

namespace gpulane::cli {
namespace {

enum class Level { kOk, kWarn, kFail };

// Prints one check's line; counts the failures.
class Report {
 public:
  void Line(Level level, const std::string& text) {
    if (level == Level::kFail) ++failed_;
    const char* word = level == Level::kOk ? "ok  " : level == Level::kWarn ? "warn" : "FAIL";
    fmt::print("{}  {}\n", word, EscapeForTerminal(text));
  }
  int failed() const { return failed_; }

 private:
  int failed_ = 0;
};

Config CheckConfig(Report& report) {
  auto config = LoadConfig();
  if (!config) {
    report.Line(Level::kFail, "config: " + config.error().message);
    return Config{};
  }
  report.Line(Level::kOk, "config: the machine's and your own files parse (docs/config.md)");
  return *config;
}

std::string CudaVersion(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

// The driver and NVML, through the daemon's snapshot when one answers (as every command reads).
std::optional<GpuSnapshot> CheckNvml(Report& report, const os::Env& env) {
  auto backend = OpenBackend(env);
  Result<GpuSnapshot> snapshot = backend ? (*backend)->Read({}) : Result<GpuSnapshot>(backend.error());
  if (!snapshot) {
    const bool no_driver = snapshot.error().kind == ErrorKind::kNoDriver;
    report.Line(Level::kFail, "nvml: " + snapshot.error().message +
                                  (no_driver ? " - fix: install the NVIDIA driver; no GPU here: the fake GPUs of README.md's "
                                               "demo (\"No GPU here? The demo\") set GPULANE_NVML_LIBRARY and FAKE_NVML_STATE"
                                             : ""));
    return std::nullopt;
  }
  std::string text = fmt::format("nvml: driver {}, NVML {}", snapshot->driver_version.value_or("unknown"),
                                 snapshot->nvml_version.value_or("unknown"));
  if (snapshot->cuda_driver_version) text += ", CUDA " + CudaVersion(*snapshot->cuda_driver_version);
  text += fmt::format(", {} GPU{}", snapshot->devices.size(), snapshot->devices.size() == 1 ? "" : "s");
  report.Line(snapshot->devices.empty() ? Level::kWarn : Level::kOk,
              snapshot->devices.empty() ? text + " - fix: nvidia-smi should list GPUs; check the driver" : text);
  for (const GpuDevice& d : snapshot->devices) {
    if (d.error) {
      report.Line(Level::kFail, fmt::format("GPU {} ({}): {} - fix: see the kernel log (dmesg) and nvidia-smi; an admin "
                                            "may need to reset it",
                                            d.pci_index, d.pci_bus_id, *d.error));
    } else if (d.compute_mode == ComputeMode::kExclusiveProcess) {
      report.Line(Level::kWarn, fmt::format("GPU {} is in EXCLUSIVE_PROCESS compute mode: one process at a time, so --mem "
                                            "shares never go there - fix: nothing for whole-GPU jobs; an admin may "
                                            "set the DEFAULT mode (nvidia-smi -i {} -c DEFAULT)",
                                            d.pci_index, d.pci_index));
    } else if (d.compute_mode == ComputeMode::kProhibited) {
      report.Line(Level::kWarn, fmt::format("GPU {} is in PROHIBITED compute mode: no CUDA process can use it - fix: an "
                                            "admin may set the DEFAULT mode (nvidia-smi -i {} -c DEFAULT)",
                                            d.pci_index, d.pci_index));
    }
  }
  return snapshot.value();
}

std::string OwnerName(uid_t uid) {
  if (const passwd* pw = getpwuid(uid)) return pw->pw_name;
  return std::to_string(uid);
}

void CheckLeaseDir(Report& report, const Config& config, const gpulane::Clock& clock) {
  const std::string path = lease::LeaseDir::DefaultPath(config.lease_dir);
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    // Its parent writable by this user (the demo's temporary folder): the first run makes it, sticky.
    const std::string parent = std::filesystem::path(path).parent_path().string();
    if (!parent.empty() && access(parent.c_str(), W_OK | X_OK) == 0) {
      report.Line(Level::kOk, fmt::format("lease directory {} does not exist yet: the first gpulane run creates it ({} "
                                          "is writable here)", path, parent));
      return;
    }
    report.Line(Level::kWarn, fmt::format("lease directory {} does not exist yet: the first gpulane run creates it when it "
                                          "can - fix: for every user, as root: install -d -m 1777 {} (at boot: "
                                          "systemd-tmpfiles --create gpulane.conf)",
                                          path, path));
    return;
  }
  if (auto dir = lease::LeaseDir::Open(path, clock); !dir) {
    report.Line(Level::kFail, fmt::format("lease directory {}: {}", path, dir.error().message));
    return;
  }
  report.Line(Level::kOk, fmt::format("lease directory {}: owner {}, mode {:04o}", path, OwnerName(st.st_uid),
                                      st.st_mode & 07777));
}

// Returns the answering daemon's mode ("system", "user"), "" when none answers.
std::string CheckDaemon(Report& report) {
  auto pong = CallIfRunning({{"op", "ping"}}, 5, false, IfDown::kStartNone);
  if (!pong) {
    report.Line(Level::kFail, "daemon: " + pong.error().message);
  } else if (!*pong) {
    const daemon::DaemonPaths user = daemon::UserPaths();
    auto counts = store::CountJobs(user.state_dir + "/jobs.db");
    if (counts && counts->unfinished == 0)
      report.Line(Level::kOk, "daemon: none runs (status, pick and run need none; submit starts your own)");
    else
      report.Line(Level::kWarn, fmt::format("daemon: yours is not running and its state {} {}: the next gpulane command about "
                                            "jobs (gpulane queue) starts it; gpulane daemon --user --install keeps it running",
                                            user.state_dir, counts ? fmt::format("holds {} unfinished jobs", counts->unfinished)
                                                                   : "cannot be read: " + counts.error().message));
  } else {
    const nlohmann::json& p = **pong;
    const nlohmann::json web = p.value("web", nlohmann::json::object());
    report.Line(Level::kOk, fmt::format("daemon: the {} daemon (pid {}) answers, {} GPUs{}", p.value("mode", "?"),
                                        p.value("pid", 0), p.value("gpus", 0),
                                        web.contains("url") ? ", dashboard " + web.value("url", "") : ""));
    return p.value("mode", "");
  }
  return "";
}

// [run] isolate: whether jobs see only their GPUs (docs/security.md "Device isolation"): the
// setting, what `gpulane run` by this user and the daemon's jobs get, and whether it works here.
void CheckIsolation(Report& report, const Config& config, const std::optional<GpuSnapshot>& snapshot,
                    const std::string& daemon_mode, os::Spawner& spawner) {
  const exec::IsolationSetting setting = exec::IsolationOf(config);
  if (!setting.devices) {
    report.Line(Level::kWarn, "isolation: off ([run] isolate): every job sees every GPU, CUDA_VISIBLE_DEVICES is advice "
                              "only - fix: isolate = \"devices\" in /etc/gpulane/config.toml (docs/security.md)");
    return;
  }
  const bool root = geteuid() == 0;
  std::string text = fmt::format("isolation: gpulane run here: {}", exec::IsolationWords(setting, root));
  if (!daemon_mode.empty())
    text += fmt::format("; the {} daemon's jobs: {}", daemon_mode,
                        daemon_mode == "system" ? exec::IsolationWords(setting, true) : "as gpulane run by their user");
  if (!root) {
    report.Line(setting.required ? Level::kFail : Level::kOk,
                setting.required ? text + " - fix: run jobs through the system daemon (gpulane submit), or an admin "
                                          "sets isolate_required = false"
                                 : text);
    return;
  }
  if (Status probe = exec::ProbeIsolation(spawner); !probe.ok()) {
    report.Line(setting.required ? Level::kFail : Level::kWarn,
                text + " - but it does not work here: " + probe.error().message + "; jobs start " +
                    (setting.required ? "not at all" : "with a warning") + " - fix: run gpulane with CAP_SYS_ADMIN");
    return;
  }
  std::vector<std::string> unknown;
  if (snapshot)
    for (const GpuDevice& d : snapshot->devices)
      if (!d.minor_number) unknown.push_back(fmt::format("GPU {}", d.pci_index));
  if (!unknown.empty()) {
    report.Line(Level::kWarn, text + fmt::format(" - but NVML does not report the minor number of {}: jobs on it start {}",
                                                 Join(unknown, ", "), setting.required ? "not at all" : "with a warning"));
    return;
  }
  report.Line(Level::kOk, text + " (a mount namespace of its own works here)");
}

void CheckCudaOrder(Report& report, const std::optional<GpuSnapshot>& snapshot) {
  const char* order = std::getenv("CUDA_DEVICE_ORDER");
  if (order && std::string(order) == "PCI_BUS_ID") {
    report.Line(Level::kOk, "CUDA_DEVICE_ORDER=PCI_BUS_ID: CUDA numbers GPUs as gpulane and nvidia-smi do");
    return;
  }
  std::set<std::string> models;
  if (snapshot)
    for (const GpuDevice& d : snapshot->devices) models.insert(d.name.value_or("?"));
  const std::string now = order ? fmt::format("CUDA_DEVICE_ORDER={}", order) : "CUDA_DEVICE_ORDER is not set";
  if (models.size() > 1) {
    report.Line(Level::kWarn, now + fmt::format(": with {} GPU models here CUDA numbers the fastest first, so GPU 1 in "
                                                "your program is not nvidia-smi's GPU 1 - fix: export "
                                                "CUDA_DEVICE_ORDER=PCI_BUS_ID (gpulane run sets it for its jobs)",
                                                models.size()));
  } else {
    report.Line(Level::kOk, now + ": harmless with one GPU model (gpulane run sets PCI_BUS_ID for its jobs)");
  }
}

// Partition windows, time limits and history use the wall clock: is it kept by NTP? adjtimex(2)
// with no modes only reads; TIME_ERROR means "not synchronised".
void CheckClock(Report& report) {
  timex tx{};
  const int state = adjtimex(&tx);
  if (state == -1) {
    report.Line(Level::kWarn, "clock: cannot read its synchronisation state (adjtimex failed)");
  } else if (state == TIME_ERROR) {
    report.Line(Level::kWarn, "clock: not synchronised (NTP): partition windows, time limits and history follow it - "
                              "fix: timedatectl set-ntp true, or run chrony");
  } else {
    report.Line(Level::kOk, "clock: synchronised");
  }
}

int RunDoctor(const os::Env& env) {
  Report report;
  const Config config = CheckConfig(report);
  const std::optional<GpuSnapshot> snapshot = CheckNvml(report, env);
  CheckLeaseDir(report, config, env.clock);
  const std::string daemon_mode = CheckDaemon(report);
  CheckIsolation(report, config, snapshot, daemon_mode, env.spawner);
  CheckCudaOrder(report, snapshot);
  CheckClock(report);
  return report.failed() ? kExitChecksFailed : kExitOk;
}

}  // namespace

void RegisterDoctor(CLI::App& app, Runner* run, const os::Env& env) {
  CLI::App* sub = app.add_subcommand(
      "doctor", "Check the setup (driver, NVML, lease directory, daemon, isolation, config, CUDA_DEVICE_ORDER, clock), one line each");
  sub->callback([run, &env] { *run = [&env] { return RunDoctor(env); }; });
}

}  // namespace gpulane::cli
