// What the daemon reads of the GPUs and the lease line: the snapshot it answers `snapshot` with
// and the line's inputs for the jobs the cap leaves out (sched/launch_past_cap.h), gathered as
// `pick`, the waiters and preemption gather theirs (lease/decision_inputs.h).
#include "daemon/daemon.h"
#include "lease/decision_inputs.h"
#include "lease/occupancy.h"
#include "lease/waiter.h"

namespace gpulane::daemon {

Result<GpuSnapshot> Daemon::MarkedSnapshot(const ReadOptions& options) {
  auto snapshot = backend_->Read(options);
  if (!snapshot) return snapshot.error();
  AnnotateProcesses(*snapshot, env_.processes);
  // What the sampler says of each GPU: drained (no new jobs: every waiter reads this snapshot)
  // and its anomalies now.
  if (sampler_) {
    SamplerThread::Marks marks = sampler_->CurrentMarks();
    for (auto& d : snapshot->devices) {
      if (auto it = marks.drained.find(d.uuid); it != marks.drained.end()) d.drained = it->second;
      if (auto it = marks.anomalies.find(d.uuid); it != marks.anomalies.end()) d.anomalies = it->second;
    }
  }
  return snapshot;
}

std::optional<LineSeen> Daemon::LineNow() {
  if (!backend_ || !limit_dir_) return std::nullopt;
  ReadOptions options;  // as a waiter of several GPUs reads them (lease::DecisionReadOptions)
  options.sensors = false;
  auto snapshot = MarkedSnapshot(options);
  if (!snapshot) return std::nullopt;
  const lease::DirContents contents = limit_dir_->Read();
  lease::WaitRequest settings;
  lease::ApplyConfig(config_, settings);
  auto in = lease::GatherDecisionInputs(contents.leases, contents.tickets, *snapshot, env_.processes, settings, clock_.WallS(),
                                        line_free_since_s_);
  if (!in) return std::nullopt;
  LineSeen seen;
  seen.line.line = lease::LineOf(in->view.tickets, in->view.occupancy.gpus);
  seen.line.gpus = std::move(in->view.occupancy.gpus);
  seen.line.limits = std::move(in->limits);
  seen.line.mig_units = std::move(in->view.occupancy.mig_units);
  for (const lease::TicketRecord& t : in->view.tickets) seen.joined.emplace(t.request.uid, t.job_text);
  for (const lease::LeaseRecord& l : contents.leases) seen.joined.emplace(l.uid, lease::JobText(l));
  return seen;
}

}  // namespace gpulane::daemon
