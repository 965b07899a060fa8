#pragma once
// A decision's inputs, gathered in one place: `pick` (cli/cmd_pick.cc), a waiting request or a
// queued job's supervisor (lease/waiter.h) and a preemptible job's holder (lease/preemption.h)
// decide over the same inputs, built the same way, so that they agree on what is free and who is
// first:
//  - the occupancy: the GPU snapshot joined with the live leases (BuildOccupancy), every free GPU
//    free since the caller first saw it (NoteFreeSince);
//  - the line: the tickets of the request's line (ViewOfLine: the machine's, or those nested in
//    the same job), in line order (sched/line_order.h);
//  - the limits: the margin, the policy and its bound on holding idle GPUs at `now_s`, and, for
//    the machine's line (not nested), every user's [limits] max_gpus and GPUs in use
//    (AddUserLimits).
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gpu/types.h"
#include "lease/occupancy.h"
#include "lease/records.h"
#include "lease/waiter.h"
#include "os/process_table.h"
#include "sched/policy.h"
#include "util/result.h"

namespace gpulane::lease {

/// What one decision reads.
struct DecisionInputs {
  LineView view;         ///< the occupancy and the line (view.parent points into the leases given)
  sched::Limits limits;  ///< the decision's settings at now_s, with the users' limits unless nested
};

/// Who gathers, and what it remembers between decisions.
struct GatherOptions {
  std::string parent_name;  ///< nested: the lease file of the job the request runs inside ("": the machine's line)
  const std::set<std::uint32_t>* ended_pids = nullptr;  ///< pids seen alive before and gone now (OccupancyOptions)
  std::optional<std::uint32_t> newcomer_uid;  ///< `pick`: the user of the request that has no ticket (its limit counts)
  std::map<std::uint32_t, std::optional<unsigned>>* max_gpus_cache = nullptr;  ///< AddUserLimits' cache
};

/// The inputs of a decision at `now_s` (seconds since the epoch) under `settings` (margin,
/// policy, max_reserve_idle, the machine's config for [limits]: ApplyConfig), from the lease
/// directory's `leases` and `tickets` (in line order) and `snapshot` (processes annotated).
/// `first_seen_free_s` is the caller's NoteFreeSince record. Errors: as ViewOfLine (kNotFound
/// when the job a nested request runs inside has ended).
Result<DecisionInputs> GatherDecisionInputs(const std::vector<LeaseRecord>& leases, const std::vector<TicketRecord>& tickets,
                                            const GpuSnapshot& snapshot, ProcessTable& processes, const WaitRequest& settings,
                                            double now_s, std::map<std::string, double>& first_seen_free_s,
                                            const GatherOptions& options = {});

}  // namespace gpulane::lease
