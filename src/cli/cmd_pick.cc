// gpulane pick: print the CUDA_VISIBLE_DEVICES value for the least-used GPUs that qualify.
#include <unistd.h>

#include <fmt/format.h>
#include <memory>

#include "cli/commands.h"
#include "cli/common.h"
#include "util/exit_codes.h"
#include "gpu/select.h"
#include "util/strings.h"
#include "util/units.h"

namespace gpulane::cli {
namespace {

struct PickOptions {
  int count = 1;
  std::string min_free;
  bool min_free_given = false;  // an empty --min-free "" is an error, not "no limit"
  int max_util = -1;
  bool share_foreign = false;
  std::string order = "memory";
  bool uuid = false;
};

Result<GpuRequest> ToRequest(const PickOptions& o) {
  GpuRequest r;
  if (o.count < 1)
    return MakeError(ErrorKind::kInvalidArgument, fmt::format("-n {}: ask for at least 1 GPU", o.count));
  r.count = static_cast<unsigned>(o.count);
  if (o.min_free_given) {
    auto bytes = ParseSizeBytes(o.min_free);
    if (!bytes) return MakeError(ErrorKind::kInvalidArgument, "--min-free: " + bytes.error().message);
    r.min_free_bytes = *bytes;
  }
  if (o.max_util >= 0) r.max_util_pct = static_cast<unsigned>(o.max_util);
  r.share_foreign = o.share_foreign;
  r.order = o.order == "util" ? PickOrder::kLeastUtil : o.order == "pci" ? PickOrder::kPci : PickOrder::kMostFree;
  return r;
}

int RunPick(const PickOptions& o) {
  auto request = ToRequest(o);
  if (!request) return Fail(request.error());
  auto backend = OpenBackend();
  if (!backend) return Fail(backend.error());
  // pick ranks by load, so utilisation is read; temperature and power are not shown: skipped
  // (each NVML query costs milliseconds the first time a process makes it).
  auto snapshot = ReadAnnotated(**backend, ReadOptions{false, true, request->count > 1});
  if (!snapshot) return Fail(snapshot.error());
  VisibleDevices allowed = AllowedGpus(*snapshot);
  auto verdicts = JudgeGpus(*snapshot, allowed, *request, static_cast<std::uint32_t>(getuid()));
  // A GPU that a gpulane job has leased is taken, even before its job shows up in NVML.
  const auto holders = LeaseHolders();
  for (auto& v : verdicts) {
    auto holder = holders.find(snapshot->devices[v.pci_index].uuid);
    if (v.qualifies && holder != holders.end() && !request->share_foreign) {
      v.qualifies = false;
      v.reason = "leased by " + holder->second;
    }
  }
  auto ranked = RankQualifying(*snapshot, verdicts, request->order);
  if (ranked.size() < request->count) {
    std::vector<std::string> reasons;
    for (const auto& v : verdicts)
      if (!v.qualifies) reasons.push_back(fmt::format("GPU{}: {}", v.pci_index, v.reason));
    std::string why = reasons.empty() ? fmt::format("this machine has {} GPU{}", snapshot->devices.size(), snapshot->devices.size() == 1 ? "" : "s") : Join(reasons, "; ");
    return Fail(MakeError(ErrorKind::kNotEnoughGpus,
                          fmt::format("{} of {} requested GPUs qualify ({}); relax --min-free/--max-util, pass "
                                      "--share-foreign, or wait with 'gpulane run'",
                                      ranked.size(), request->count, why)));
  }
  auto chosen = ChooseSet(*snapshot, ranked, request->count);
  fmt::print("{}\n", FormatVisibleDevices(*snapshot, chosen, o.uuid));
  return kExitOk;
}

}  // namespace

void RegisterPick(CLI::App& app, Runner* run) {
  auto o = std::make_shared<PickOptions>();
  CLI::App* sub = app.add_subcommand(
      "pick", "Print a CUDA_VISIBLE_DEVICES value for the least-used GPUs: CUDA_VISIBLE_DEVICES=$(gpulane pick -n 2)");
  sub->add_option("-n,--count", o->count, "How many GPUs (default 1)");
  sub->add_option("--min-free", o->min_free, "Each GPU needs at least this much free memory: 20GiB, 20G, 512MiB, bytes")
      ->type_name("SIZE");
  sub->add_option("--max-util", o->max_util, "Each GPU at most this busy, in percent")
      ->check(CLI::Range(0, 100))
      ->type_name("PCT");
  sub->add_flag("--share-foreign", o->share_foreign,
                "Count GPUs with other users' compute processes as free (default: they are not)");
  sub->add_option("--order", o->order, "memory (most free first, default), util (least busy first), pci")
      ->check(CLI::IsMember({"memory", "util", "pci"}));
  sub->add_flag("--uuid", o->uuid, "Print GPU UUIDs instead of indices");
  sub->callback([o, sub, run] {
    o->min_free_given = sub->count("--min-free") > 0;
    *run = [o] { return RunPick(*o); };
  });
}

}  // namespace gpulane::cli
