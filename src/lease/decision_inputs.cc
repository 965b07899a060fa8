#include "lease/decision_inputs.h"

namespace gpulane::lease {

Result<DecisionInputs> GatherDecisionInputs(const std::vector<LeaseRecord>& leases, const std::vector<TicketRecord>& tickets,
                                            const GpuSnapshot& snapshot, ProcessTable& processes, const WaitRequest& settings,
                                            double now_s, std::map<std::string, double>& first_seen_free_s,
                                            const GatherOptions& options) {
  auto view = ViewOfLine(leases, tickets, snapshot, processes, options.parent_name, options.ended_pids);
  if (!view) return view.error();
  DecisionInputs in;
  in.view = std::move(view).value();
  NoteFreeSince(in.view.occupancy.gpus, now_s, first_seen_free_s);
  in.limits = sched::Limits{settings.margin_bytes, settings.policy, now_s, settings.max_reserve_idle_s};
  if (!in.view.parent)  // a nested request runs on its job's GPUs: no user limit applies inside it
    AddUserLimits(settings.limits_config, leases, in.view.tickets, options.newcomer_uid,
                  static_cast<unsigned>(snapshot.devices.size()), in.limits, options.max_gpus_cache);
  return in;
}

}  // namespace gpulane::lease
