#include "gpu/select.h"

#include <algorithm>
#include <fmt/format.h>

#include "sched/policy.h"
#include "util/units.h"

namespace gpulane {
namespace {

bool HasForeignProcess(const GpuDevice& d, std::uint32_t self_uid, std::string* who) {
  if (!d.processes) return false;
  for (const auto& p : *d.processes) {
    if (p.uid && *p.uid == self_uid) continue;
    *who = p.user ? fmt::format("{}'s {} (pid {})", *p.user, p.command.value_or("process"), p.pid)
                  : fmt::format("pid {} (not visible here)", p.pid);
    return true;
  }
  return false;
}

std::string Judge(const GpuDevice& d, const VisibleDevices& allowed, const GpuRequest& r, std::uint32_t self_uid) {
  if (!allowed.Allows(d.pci_index)) return "not in CUDA_VISIBLE_DEVICES";
  if (d.failed()) return fmt::format("failed ({})", *d.error);
  if (d.mig_enabled.value_or(false)) return "MIG mode on";
  if (d.compute_mode == ComputeMode::kProhibited) return "compute mode PROHIBITED";
  bool busy = d.processes && !d.processes->empty();
  if (d.compute_mode == ComputeMode::kExclusiveProcess && busy) return "EXCLUSIVE_PROCESS and in use";
  std::string who;
  if (!r.share_foreign && HasForeignProcess(d, self_uid, &who)) return fmt::format("in use by {}", who);
  if (r.min_free_bytes) {
    if (!d.memory_free_bytes) return "free memory not reported";
    if (*d.memory_free_bytes < *r.min_free_bytes)
      return fmt::format("{} free < {}", FormatBytes(*d.memory_free_bytes), FormatBytes(*r.min_free_bytes));
  }
  if (r.max_util_pct) {
    if (!d.utilization_gpu_pct) return "utilisation not reported";
    if (*d.utilization_gpu_pct > *r.max_util_pct)
      return fmt::format("{}% busy > {}%", *d.utilization_gpu_pct, *r.max_util_pct);
  }
  return "";
}

unsigned LinksBetween(const GpuDevice& a, const GpuDevice& b) {
  for (const auto& peer : a.nvlink_peers)
    if (peer.pci_bus_id == b.pci_bus_id) return peer.links;
  return 0;
}

}  // namespace

std::vector<GpuVerdict> JudgeGpus(const GpuSnapshot& snapshot, const VisibleDevices& allowed,
                                  const GpuRequest& request, std::uint32_t self_uid) {
  std::vector<GpuVerdict> out;
  for (const auto& d : snapshot.devices) {
    std::string reason = Judge(d, allowed, request, self_uid);
    out.push_back({d.pci_index, reason.empty(), reason});
  }
  return out;
}

std::vector<unsigned> RankQualifying(const GpuSnapshot& snapshot, const std::vector<GpuVerdict>& verdicts,
                                     PickOrder order) {
  std::vector<unsigned> ranked;
  for (const auto& v : verdicts)
    if (v.qualifies) ranked.push_back(v.pci_index);
  auto free_of = [&](unsigned i) { return snapshot.devices[i].memory_free_bytes.value_or(0); };
  auto util_of = [&](unsigned i) { return snapshot.devices[i].utilization_gpu_pct.value_or(101); };
  std::stable_sort(ranked.begin(), ranked.end(), [&](unsigned a, unsigned b) {
    switch (order) {
      case PickOrder::kMostFree:
        if (free_of(a) != free_of(b)) return free_of(a) > free_of(b);
        if (util_of(a) != util_of(b)) return util_of(a) < util_of(b);
        return a < b;
      case PickOrder::kLeastUtil:
        if (util_of(a) != util_of(b)) return util_of(a) < util_of(b);
        if (free_of(a) != free_of(b)) return free_of(a) > free_of(b);
        return a < b;
      case PickOrder::kPci:
        return a < b;
    }
    return a < b;
  });
  return ranked;
}

std::vector<unsigned> ChooseSet(const GpuSnapshot& snapshot, const std::vector<unsigned>& ranked, unsigned count) {
  return sched::ChooseLinkedSet(ranked, count, [&](unsigned a, unsigned b) {
    return LinksBetween(snapshot.devices[a], snapshot.devices[b]) > 0;
  });
}

std::string FormatVisibleDevices(const GpuSnapshot& snapshot, std::vector<unsigned> chosen, bool uuids) {
  std::sort(chosen.begin(), chosen.end());
  std::string out;
  for (unsigned i : chosen) {
    if (!out.empty()) out += ',';
    out += uuids ? snapshot.devices[i].uuid : std::to_string(i);
  }
  return out;
}

}  // namespace gpulane
