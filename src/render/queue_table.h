#pragma once
// The `gpulane queue` table: one line per job (id, "12_3" for array tasks, user, name, GPUs, state,
// age, where it runs or why it waits). Rendered by the daemon, which has the jobs at hand, so
// listing 100,000 jobs does not mean building and parsing 100,000 JSON objects.
#include <string>
#include <vector>

#include "store/job.h"

namespace gpulane {

/// The state as the text of queue, show and top words it: store::StateName, but "waiting" for
/// launching (its supervisor waits in line for GPUs; the job has not started). JSON, the store and
/// the metrics keep the state's name.
const char* StateLabel(store::JobState state);
/// StateLabel of a state's name ("launching" -> "waiting"); any other text as it is.
std::string StateLabelOf(const std::string& name);

/// The header line (with its newline).
std::string QueueTableHeader();
/// Appends the job's line to `out`. `gpu_indices`: PCI-order indices of the GPUs it runs on; `now`:
/// seconds since the epoch, for the age.
void AppendQueueRow(const store::Job& job, const std::vector<unsigned>& gpu_indices, double now, std::string& out);

/// A request in the GPUs' line that is no queued job (`gpulane run`, a Python lease), as `queue`
/// lists it under the daemon's jobs: its job id ("r4121"), owner, label, request, "waiting", how
/// long it has waited and `why` ("gpulane run, 2nd in line"); every field escaped for the terminal.
void AppendLineRow(const std::string& id, const std::string& user, const std::string& label, const sched::Request& request,
                   double waited_s, const std::string& why, std::string& out);

/// A `gpulane run` (or Python lease) that holds GPUs now, as `queue` lists it beside the waiting
/// ones: its job id, owner, label, GPUs, "running", how long since it asked for them and `where`
/// ("gpulane run"); every field escaped for the terminal.
void AppendRunningRow(const std::string& id, const std::string& user, const std::string& label,
                      const sched::Request& request, double age_s, const std::string& where, std::string& out);

}  // namespace gpulane
