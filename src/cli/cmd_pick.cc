// gpulane pick: print the CUDA_VISIBLE_DEVICES value for the GPUs that `gpulane run --no-wait`
// with the same options would be granted now: the policy (sched/) asked about one more request in
// line, over the same GPU state (NVML processes joined with the live leases and tickets).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fmt/format.h>
#include <map>
#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/request_options.h"
#include "gpu/visible_devices.h"
#include "lease/decision_inputs.h"
#include "lease/lease_dir.h"
#include "lease/occupancy.h"
#include "lease/waiter.h"
#include "os/process_table.h"
#include "sched/partition.h"
#include "util/clock.h"
#include "util/config.h"
#include "util/exit_codes.h"
#include "util/shell_words.h"
#include "util/week_window.h"

namespace gpulane::cli {
namespace {

struct PickOptions {
  RequestOptions request;
  bool uuid = false;
  bool export_line = false;
};

// `--export`: one line that, eval'd by bash, zsh, dash (any POSIX sh; fish 3 too), EXPORTS both
// variables to the programs the shell starts next: without `export`, eval would set shell variables
// that no child sees. The value is quoted for the shell unless every byte is one no shell treats
// specially (indices, GPU- and MIG- UUIDs).
std::string ExportLine(const std::string& devices) {
  const bool plain = !devices.empty() && std::all_of(devices.begin(), devices.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string_view(",._:/-").find(c) != std::string_view::npos;
  });
  return fmt::format("export CUDA_VISIBLE_DEVICES={} CUDA_DEVICE_ORDER=PCI_BUS_ID", plain ? devices : QuoteForShell(devices));
}

int RunPick(const PickOptions& o, const os::Env& env) {
  auto request = o.request.ToRequest();
  if (!request) return Fail(request.error());
  auto config = LoadConfig();
  if (!config) return Fail(config.error());
  // The lease directory as `run` opens it (created when missing, refused when unsafe), before the
  // GPUs as run does, so pick fails exactly where and how run --no-wait would.
  auto dir = lease::LeaseDir::Open(lease::LeaseDir::DefaultPath(config->lease_dir), env.clock);
  if (!dir) return Fail(dir.error());
  auto backend = OpenBackend(env);
  if (!backend) return Fail(backend.error());
  auto snapshot = ReadAnnotated(**backend, lease::DecisionReadOptions(*request));
  if (!snapshot) return Fail(snapshot.error());
  AllowedGpus(*snapshot);  // warnings about the inherited CUDA_VISIBLE_DEVICES
  if (!o.export_line) WarnIfCudaOrderDiffers(*snapshot);
  auto allowed = ResolveAllowedGpus(request->gpu_list, InheritedAllocation(), *snapshot);
  if (!allowed) return Fail(allowed.error());
  const lease::DirContents contents = dir->Read();
  ProcfsProcessTable table;
  // Inside a gpulane job (a pipeline step), pick chooses among that job's GPUs.
  const lease::LeaseRecord* parent =
      lease::FindParentLease(contents.leases, EnvironmentValue("GPULANE_JOB_ID"), static_cast<std::uint32_t>(getpid()), table);
  // The decision's inputs as a waiter gathers them (lease/decision_inputs.h); pick looks once:
  // every free GPU is free since now.
  lease::WaitRequest settings;
  lease::ApplyConfig(*config, settings);
  std::map<std::string, double> first_seen_free_s;
  auto in = lease::GatherDecisionInputs(contents.leases, contents.tickets, *snapshot, table, settings, request->submit_time_s,
                                        first_seen_free_s, {parent ? parent->name : "", nullptr, request->uid, nullptr});
  if (!in) return Fail(in.error());
  request->allowed_uuids = lease::WithinParent(std::move(allowed).value(), parent);
  // --partition (or sched.default_partition): only its GPUs, and nothing while it is closed.
  if (auto partition = sched::SelectPartition(*config, request->partition); !partition) {
    return Fail(partition.error());
  } else if (*partition) {
    std::vector<std::string> uuids;
    for (const auto& d : snapshot->devices) uuids.push_back(d.uuid);
    if (Status s = sched::RestrictToPartition(**partition, *request, uuids); !s.ok()) return Fail(s.error());
    if (Status s = sched::RequireOpen(**partition, LocalWeekSeconds(std::time(nullptr))); !s.ok()) return Fail(s.error());
  }
  const sched::Decision decision = lease::DecideNewcomer(in->view.occupancy, in->view.tickets, *request, in->limits,
                                                               contents.shares ? &*contents.shares : nullptr,
                                                               env.clock.WallS());
  auto chosen = sched::GrantedNow(*request, decision, static_cast<unsigned>(snapshot->devices.size()));
  if (!chosen) return Fail(chosen.error());
  // A MIG device: CUDA selects it only by its MIG- UUID.
  const std::string devices = decision.mig_uuid ? *decision.mig_uuid : FormatVisibleDevices(*snapshot, *chosen, o.uuid || InheritedAllocation().in_slurm());
  if (o.export_line) fmt::print("{}\n", ExportLine(devices));
  else fmt::print("{}\n", devices);
  return kExitOk;
}

}  // namespace

void RegisterPick(CLI::App& app, Runner* run, const os::Env& env) {
  auto o = std::make_shared<PickOptions>();
  CLI::App* sub = app.add_subcommand(
      "pick", "Print a CUDA_VISIBLE_DEVICES value for the least-used GPUs: CUDA_VISIBLE_DEVICES=$(gpulane pick -g 2)");
  o->request.Register(sub);
  sub->add_flag("--uuid", o->uuid, "Print GPU UUIDs instead of indices");
  sub->add_flag("--export", o->export_line,
                "Print 'export CUDA_VISIBLE_DEVICES=... CUDA_DEVICE_ORDER=PCI_BUS_ID' for bash, zsh or sh: "
                "out=$(gpulane pick -g 2 --export) && eval \"$out\" && python train.py (runs only when pick "
                "succeeded). fish: set -l out (gpulane pick -g 2 --export); and eval $out; and python train.py");
  sub->callback([o, run, &env] { *run = [o, &env] { return RunPick(*o, env); }; });
}

}  // namespace gpulane::cli
