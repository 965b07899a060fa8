#include "lease/job_observation.h"

#include <algorithm>

#include "lease/occupancy.h"

namespace gpulane::lease {
namespace {

// The fraction of its GPU a lease's GPU is.
double ShareOf(const LeasedGpu& g, const GpuDevice* d, const MigDevice* mig) {
  const auto fraction = [](std::uint64_t part, const std::optional<std::uint64_t>& total) {
    return total && *total > 0 ? std::min(1.0, static_cast<double>(part) / static_cast<double>(*total)) : 1.0;
  };
  if (mig) return mig->memory_total_bytes && d ? fraction(*mig->memory_total_bytes, d->memory_total_bytes) : 1.0;
  if (!g.mem_bytes || !d) return 1;
  return fraction(*g.mem_bytes, d->memory_total_bytes);
}

}  // namespace

// (job_observation.h) The device of `uuid` (a GPU's, or the GPU a MIG device of that UUID is on: *mig set).
const GpuDevice* DeviceOf(const GpuSnapshot& s, const std::string& uuid, const MigDevice** mig) {
  *mig = nullptr;
  for (const auto& d : s.devices) {
    if (d.uuid == uuid) return &d;
    for (const auto& m : d.mig_devices)
      if (m.uuid == uuid) {
        *mig = &m;
        return &d;
      }
  }
  return nullptr;
}


std::vector<LeaseGpuView> ViewLease(const GpuSnapshot& snapshot, const std::vector<LeaseRecord>& leases, std::size_t index,
                                    const std::vector<std::vector<int>>& owners) {
  const LeaseRecord& lease = leases[index];
  const int me = static_cast<int>(index);
  std::vector<LeaseGpuView> views;
  for (const auto& g : lease.gpus) {
    LeaseGpuView v;
    v.uuid = g.uuid;
    const MigDevice* mig = nullptr;
    const GpuDevice* d = DeviceOf(snapshot, g.uuid, &mig);
    v.device = d;
    v.whole = !mig && !g.mem_bytes;
    v.share = ShareOf(g, d, mig);
    if (d && !d->failed()) {
      const std::size_t di = static_cast<std::size_t>(d - snapshot.devices.data());
      if (d->processes && di < owners.size()) {
        std::uint64_t memory = 0;
        double util = 0;
        bool memory_known = true, util_known = true;
        // NVML gives every process of a GPU its SM share or none of them (per-process utilisation
        // not supported, or not asked for): a job with no process there used 0 % of it only when
        // the GPU reports shares at all. Unknown is not 0 % (nor idle).
        bool shares_reported = false;
        for (const GpuProcess& p : *d->processes) shares_reported = shares_reported || p.sm_util_pct.has_value();
        for (std::size_t k = 0; k < d->processes->size() && k < owners[di].size(); ++k) {
          const GpuProcess& p = (*d->processes)[k];
          const int owner = owners[di][k];
          if (mig && p.mig_uuid != g.uuid) continue;
          if (owner == kEndedProcess) continue;  // NVML lags its exit
          const bool nested = owner >= 0 && leases[static_cast<std::size_t>(owner)].parent == lease.name;
          if (owner != me && !nested) {
            v.foreign.push_back(DescribeProcess(p));
            continue;
          }
          if (p.used_memory_bytes) memory += *p.used_memory_bytes;
          else memory_known = false;
          if (p.sm_util_pct) util += *p.sm_util_pct;
          else util_known = false;
        }
        if (memory_known) v.observed.memory_bytes = memory;
        if (!v.whole && util_known && shares_reported) v.observed.util_pct = std::min(util, 100.0);
      }
      if (v.whole && d->utilization_gpu_pct) v.observed.util_pct = *d->utilization_gpu_pct;
      if (!mig) v.observed.energy_mj = d->energy_mj;
    }
    views.push_back(std::move(v));
  }
  return views;
}

}  // namespace gpulane::lease
