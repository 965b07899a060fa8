#include "lease/occupancy.h"

#include <fmt/format.h>

namespace gpulane::lease {
namespace {

std::string DescribeProcess(const GpuProcess& p) {
  if (p.user) return fmt::format("{}'s {} (pid {})", *p.user, p.command.value_or("process"), p.pid);
  return fmt::format("pid {} (not visible here)", p.pid);
}

void Classify(const GpuDevice& d, const std::vector<LeaseRecord>& leases, ProcessTable& table,
              sched::GpuState& g, std::vector<std::uint64_t>& used_by_lease) {
  if (!d.processes) return;
  for (const GpuProcess& p : *d.processes) {
    const std::uint64_t mem = p.used_memory_bytes.value_or(0);
    if (!table.Links(p.pid)) {
      // Seen in /proc when the snapshot was annotated but gone now: it ended and NVML lags, so its
      // memory is as good as free. Never seen: it lives in another PID namespace (a container).
      if (p.user) g.free_bytes += mem;
      else g.foreign.push_back(DescribeProcess(p));
      continue;
    }
    bool owned = false;
    for (std::size_t i = 0; i < leases.size() && !owned; ++i) {
      if (BelongsTo(table, p.pid, static_cast<std::uint32_t>(leases[i].pid), static_cast<std::uint32_t>(leases[i].pgid))) {
        used_by_lease[i] += mem;
        owned = true;
      }
    }
    if (!owned) g.foreign.push_back(DescribeProcess(p));
  }
}

}  // namespace

std::vector<sched::GpuState> BuildGpuStates(const GpuSnapshot& snapshot, const std::vector<LeaseRecord>& leases,
                                            ProcessTable& processes) {
  std::vector<sched::GpuState> out;
  for (const GpuDevice& d : snapshot.devices) {
    sched::GpuState g;
    g.index = d.pci_index;
    g.uuid = d.uuid;
    if (d.failed()) g.usable = false, g.unusable_reason = fmt::format("failed ({})", *d.error);
    else if (d.mig_enabled.value_or(false)) g.usable = false, g.unusable_reason = "MIG mode on";
    else if (d.compute_mode == ComputeMode::kProhibited) g.usable = false, g.unusable_reason = "compute mode PROHIBITED";
    g.exclusive_process_mode = d.compute_mode == ComputeMode::kExclusiveProcess;
    g.total_bytes = d.memory_total_bytes.value_or(0);
    g.free_bytes = d.memory_free_bytes.value_or(0);
    g.util_pct = d.utilization_gpu_pct;
    for (const auto& peer : d.nvlink_peers)
      for (const auto& other : snapshot.devices)
        if (other.pci_bus_id == peer.pci_bus_id && peer.links > 0) g.nvlink_peers.push_back(other.pci_index);

    std::vector<std::uint64_t> used_by_lease(leases.size(), 0);
    Classify(d, leases, processes, g, used_by_lease);
    for (std::size_t i = 0; i < leases.size(); ++i) {
      for (const LeasedGpu& lg : leases[i].gpus) {
        if (lg.uuid != d.uuid) continue;
        if (!lg.mem_bytes) {
          g.exclusive_holder = Describe(leases[i]);
        } else {
          ++g.shared_leases;
          if (*lg.mem_bytes > used_by_lease[i]) g.unallocated_reservation_bytes += *lg.mem_bytes - used_by_lease[i];
        }
      }
    }
    out.push_back(std::move(g));
  }
  return out;
}

sched::Request ToRequest(const TicketRecord& t, const GpuSnapshot& snapshot) {
  sched::Request r;
  r.id = t.id;
  r.count = t.count;
  r.mem_bytes = t.mem_bytes;
  r.min_free_bytes = t.min_free_bytes;
  r.max_util_pct = t.max_util_pct;
  r.share_foreign = t.share_foreign;
  for (const auto& uuid : t.allowed_uuids) {
    if (uuid == "*") {  // a ticket taken before its GPUs were read: any GPU
      for (const auto& d : snapshot.devices) r.allowed.push_back(d.pci_index);
      break;
    }
    if (const GpuDevice* d = snapshot.FindByUuid(uuid)) r.allowed.push_back(d->pci_index);
  }
  r.order = t.order == "util" ? sched::Order::kLeastUtil : t.order == "pci" ? sched::Order::kPci : sched::Order::kMostFree;
  return r;
}

}  // namespace gpulane::lease
