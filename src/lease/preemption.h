#pragma once
// The holder's side of preemption (sched/policy.h, "Preemptible jobs"): a preemptible job's
// lifecycle asks, while the job runs, whether the line's decision makes it give way. Nobody
// signals another user's job: every waiter and every preemptible holder makes the same decision
// (sched::Schedule over the lease directory and the GPUs), the waiter waits for the GPUs it names
// in Decision::preempt, and the holders of those GPUs stop their own jobs.
#include <map>
#include <optional>
#include <string>

#include "gpu/types.h"
#include "lease/lease_dir.h"
#include "lease/waiter.h"
#include "os/process_table.h"
#include "sched/unclaimed.h"

namespace gpulane::lease {

/// Why the preemptible job holding the lease named `own_lease` must give way now, for its log and
/// status ("preempted: alice's job 12 (1st in line) needs GPU1"; "alice's job" when her ticket does
/// not name its job), or nullopt when no decision of the machine's line names one of its GPUs in
/// Decision::preempt. Decides as a waiter of the machine's line would under `w`'s settings
/// (lease/decision_inputs.h) at `now_s` (seconds since the epoch), from `contents` and `snapshot`
/// (processes annotated, AnnotateProcesses); the own lease counts as preemptible whatever its file
/// says. `first_seen_free_s` is the caller's NoteFreeSince record; `unclaimed` its memory of grants
/// nobody claimed (sched/unclaimed.h, its waiter's to begin with): a ticket that lost its place
/// there makes nobody give way.
std::optional<std::string> PreemptionOf(const DirContents& contents, const GpuSnapshot& snapshot, ProcessTable& processes,
                                        const std::string& own_lease, const WaitRequest& w, double now_s,
                                        std::map<std::string, double>& first_seen_free_s, sched::LineMemory& unclaimed);

}  // namespace gpulane::lease
