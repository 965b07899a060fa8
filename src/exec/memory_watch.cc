#include "exec/memory_watch.h"

#include "lease/occupancy.h"
#include "os/process_table.h"

namespace gpulane::exec {

bool ViewOwnLease(GpuBackend& backend, ProcessTable& processes, const ReadOptions& options, const lease::LeaseDir& dir,
                  const std::string& lease_name, const std::function<void(const std::vector<lease::LeaseGpuView>&)>& use) {
  auto snapshot = backend.Read(options);
  if (!snapshot) return false;
  AnnotateProcesses(*snapshot, processes);
  const lease::DirContents contents = dir.Read();
  const auto owners = lease::ProcessOwners(*snapshot, contents.leases, processes);
  for (std::size_t i = 0; i < contents.leases.size(); ++i) {
    if (contents.leases[i].name != lease_name) continue;
    use(lease::ViewLease(*snapshot, contents.leases, i, owners));
    return true;
  }
  return false;
}

bool MemoryWatch::Observe(double now_s, const std::vector<lease::LeaseGpuView>& views) {
  if (!active() || reason_) return false;
  std::vector<telemetry::GuardedGpu> gpus;
  for (const lease::LeaseGpuView& v : views) {
    telemetry::GuardedGpu g;
    g.gpu_index = v.device ? v.device->pci_index : 0;
    if (!v.whole) g.declared_bytes = mem_bytes_;  // a share (--mig never comes with --mem)
    g.used_bytes = v.observed.memory_bytes;
    gpus.push_back(g);
  }
  const telemetry::GuardDecision d = guard_.Observe(now_s, gpus);
  if (d.action == telemetry::GuardAction::kWarn && warn_) warn_(d.message);
  if (d.action != telemetry::GuardAction::kStop) return false;
  // Said once, at the job's end, where a time limit's stop is said too (the supervisor's last line
  // in the job's log, `gpulane run`'s error): not as a warning here as well.
  reason_ = d.message;
  return true;
}

}  // namespace gpulane::exec
