// gpulane status: every GPU and who uses it; --json, --watch, -p.
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fmt/format.h>
#include <memory>

#include "util/timing.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/watch_frames.h"
#include "cli/status_watch.h"
#include "util/exit_codes.h"
#include "lease/decision_inputs.h"
#include "lease/lease_dir.h"
#include "lease/line_shares.h"
#include "util/terminal_text.h"
#include "lease/occupancy.h"
#include "lease/waiter.h"
#include "os/process_table.h"
#include "render/status_view.h"
#include "daemon/paths.h"
#include "proto/call.h"
#include "util/config.h"
#include "util/terminal_text.h"
#include "util/week_window.h"
#include "sched/partition.h"
#include "util/units.h"

namespace gpulane::cli {
namespace {

struct StatusOptions {
  bool json = false;
  bool full_processes = false;
  std::string watch;  // "" unless --watch; seconds as text
  bool watch_given = false;
  std::string color = "auto";
  std::string dashboard_url;  // the answering daemon's (DashboardUrl); "" for none
};

// The dashboard of the first daemon that answers where snapshots are asked (the system daemon's,
// else the user's own), as its ping says; "" when none answers or it serves none. Never starts or
// waits for a daemon.
std::string DashboardUrl() {
  for (const auto& socket : daemon::SnapshotSockets()) {
    auto pong = proto::CallExisting(socket, {{"op", "ping"}}, 2);
    if (pong) return pong->value("web", nlohmann::json::object()).value("url", "");
  }
  return "";
}

// The processes of gpulane jobs on GPUs those jobs did not lease, as the scheduler sees them: the
// one join of NVML's processes with the live leases that pick and run use (lease::BuildOccupancy).
std::map<std::pair<unsigned, std::uint32_t>, StrayMark> StraysOf(const GpuSnapshot& snapshot,
                                                                const std::vector<lease::LeaseRecord>& leases,
                                                                ProcessTable& table) {
  std::map<std::pair<unsigned, std::uint32_t>, StrayMark> strays;
  if (leases.empty()) return strays;  // no job, no stray: spare status the /proc walk
  for (const lease::StrayProcess& s : lease::BuildOccupancy(snapshot, leases, table).strays)
    strays[{s.gpu, s.pid}] = StrayMark{s.job_id, s.job_text, s.user};
  return strays;
}

// The GPUs the line holds for waiting requests, decided as `pick` decides them (the inputs a waiter
// gathers, lease::HeldForLine), so that status never shows free a GPU that pick refuses.
std::map<std::string, std::string> ReservedOf(const GpuSnapshot& snapshot, const lease::DirContents& contents,
                                              const Result<Config>& config, ProcessTable& table,
                                              const gpulane::Clock& clock, std::vector<std::string>& warnings) {
  std::map<std::string, std::string> reserved;
  if (contents.tickets.empty()) return reserved;  // nobody waits: nothing is held
  lease::WaitRequest settings;
  if (config) lease::ApplyConfig(*config, settings);
  std::map<std::string, double> first_seen_free_s;  // as pick: every free GPU is free since now
  auto in = config ? lease::GatherDecisionInputs(contents.leases, contents.tickets, snapshot, table, settings, clock.WallS(),
                                                 first_seen_free_s)
                   : Result<lease::DecisionInputs>(config.error());
  if (!in) {
    warnings.push_back("which GPUs are held for waiting jobs is not known: " + in.error().message);
    return reserved;
  }
  for (const auto& [uuid, ticket] : lease::HeldForLine(in->view.occupancy, in->view.tickets, in->limits))
    reserved[uuid] = lease::DescribeWaiter(*ticket);
  return reserved;
}

// `config`: the configuration as loaded once for this frame (the line's settings, the partitions).
StatusContext MakeContext(const GpuSnapshot& snapshot, bool warn, const Result<Config>& config, const gpulane::Clock& clock) {
  StatusContext context;
  context.hostname = HostName();
  context.now = std::time(nullptr);
  context.cuda_visible_devices = InheritedVisibleDevices();
  const InheritedGpus allocation = InheritedAllocation();
  context.slurm_gpus = allocation.slurm_gpus;
  context.visible = warn ? AllowedGpus(snapshot) : ParseInheritedGpus(allocation, snapshot);
  TimingMark("context");
  const lease::DirContents contents = ReadLeaseDirIfPresent(clock);
  context.holders = LeaseHolders(contents.leases, snapshot);
  ProcfsProcessTable table;  // one /proc view for the strays and the line's decision
  context.strays = StraysOf(snapshot, contents.leases, table);
  context.reserved = ReservedOf(snapshot, contents, config, table, clock, context.lease_warnings);
  if (!contents.shares_unreadable.empty())
    context.lease_warnings.push_back(fmt::format("the published fair-share factors ({}) order nothing: {}; the line goes "
                                                 "by --priority and submission",
                                                 lease::kLineSharesFile, contents.shares_unreadable));
  TimingMark("lease holders");
  return context;
}

std::string Render(const GpuSnapshot& snapshot, const StatusContext& context, const Result<Config>& config,
                   const StatusOptions& o, bool color) {
  // A process may name itself with bytes that are not UTF-8: those cannot be a JSON string and are
  // written as U+FFFD (a strict dump would throw; docs/status-json.md).
  if (o.json)
    return StatusToJson(snapshot, context).dump(o.watch_given ? -1 : 2, ' ', false, nlohmann::json::error_handler_t::replace) +
           "\n";
  std::string text = RenderStatusText(snapshot, context, {color, o.full_processes});
  if (snapshot.nvml_order_differs())
    text += "note: NVML (and nvidia-smi) number these GPUs differently from PCI bus order; gpulane shows PCI "
            "order, which CUDA uses with CUDA_DEVICE_ORDER=PCI_BUS_ID (nvml:N is nvidia-smi's number)\n";
  for (const auto& line : snapshot.warnings) text += "warning: " + line + "\n";  // the daemon's: its job store
  for (const auto& line : context.lease_warnings) text += "warning: " + EscapeForTerminal(line) + "\n";
  if (!o.dashboard_url.empty()) text += "dashboard: " + EscapeForTerminal(o.dashboard_url) + "\n";
  // The machine's partitions, open or closed now (local time).
  if (config) {
    const double week_s = LocalWeekSeconds(std::time(nullptr));
    for (const PartitionConfig& p : config->partitions) text += sched::StatusLine(p, week_s) + "\n";
  }
  return text;
}

// Redraws every `interval_s` until a stop signal, or until `frames` were written (0: no limit).
int Watch(GpuBackend& backend, StatusOptions o, double interval_s, const gpulane::Clock& clock, long frames = 0) {
  if (!o.json) o.dashboard_url = DashboardUrl();
  const bool color = UseColor(o.color);
  return WatchFrames(interval_s, frames, isatty(STDOUT_FILENO) == 1 && !o.json, [&](bool first) -> Frame {
    auto snapshot = ReadAnnotated(backend);
    if (!snapshot) return Fail(snapshot.error());
    const auto config = LoadConfig();
    return Render(*snapshot, MakeContext(*snapshot, first, config, clock), config, o, color);
  });
}

int RunStatus(const StatusOptions& o, const os::Env& env) {
  double interval_s = 1.0;
  if (o.watch_given && !o.watch.empty()) {
    auto parsed = ParseDurationOrSecondsS(o.watch);
    if (!parsed || *parsed < 0.1)
      return Fail(MakeError(ErrorKind::kInvalidArgument,
                            fmt::format("--watch '{}': give the refresh interval in seconds, at least 0.1", o.watch)));
    interval_s = *parsed;
  }
  auto backend = OpenBackend(env);
  if (!backend) return Fail(backend.error());
  if (o.watch_given) return Watch(**backend, o, interval_s, env.clock);
  auto snapshot = ReadAnnotated(**backend);
  if (!snapshot) return Fail(snapshot.error());
  TimingMark("snapshot");
  StatusOptions shown = o;
  if (!o.json) shown.dashboard_url = DashboardUrl();
  const auto config = LoadConfig();
  std::string out = Render(*snapshot, MakeContext(*snapshot, true, config, env.clock), config, shown, UseColor(o.color));
  TimingMark("rendered");
  std::fwrite(out.data(), 1, out.size(), stdout);
  return kExitOk;
}

}  // namespace

int WatchStatus(double interval_s, long frames, const std::string& color, const os::Env& env) {
  auto backend = OpenBackend(env);
  if (!backend) return Fail(backend.error());
  StatusOptions o;
  o.watch_given = true;
  o.color = color;
  return Watch(**backend, o, interval_s, env.clock, frames);
}

void RegisterStatus(CLI::App& app, Runner* run, const os::Env& env) {
  auto o = std::make_shared<StatusOptions>();
  CLI::App* sub = app.add_subcommand("status", "Show every GPU, its load and who uses it");
  sub->add_flag("--json", o->json, "Print a JSON document (schema: docs/status-json.md)");
  sub->add_flag("-p,--processes", o->full_processes, "List every process with its whole command line");
  sub->add_option("--watch", o->watch, "Refresh every SECONDS (default 1) until Ctrl-C; with --json, one document a line")
      ->expected(0, 1)
      ->type_name("SECONDS");
  sub->add_option("--color", o->color, "Colour: auto (a terminal without NO_COLOR), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  sub->callback([o, sub, run, &env] {
    o->watch_given = sub->count("--watch") > 0;
    *run = [o, &env] { return RunStatus(*o, env); };
  });
}

}  // namespace gpulane::cli
