#pragma once
// The processes of one live lease, for whoever must end it from outside its job (the daemon, when
// a lease outlives its time limit: daemon/time_limit_watch.h).
#include <sys/types.h>

#include <vector>

#include "lease/records.h"
#include "os/proc_scan.h"
#include "os/process_table.h"

namespace gpulane::lease {

/// The processes that keep `lease` alive or run its job, its owner's only (a process of another
/// uid is never one, whatever the lease file says): those holding its file open (its lock lives
/// as long as one of them does), those in its job's process group, the process its job descends
/// from (AnchorOf) and every descendant of any of these. `procs`: every process (ListProcesses).
std::vector<pid_t> ProcessesOfLease(const LeaseRecord& lease, const std::vector<ProcEntry>& procs, ProcessTable& table,
                                    const std::string& proc_root = "/proc");

}  // namespace gpulane::lease
