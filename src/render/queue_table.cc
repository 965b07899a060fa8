#include "render/queue_table.h"

#include <fmt/format.h>

#include "util/units.h"

namespace gpulane {
namespace {

// ID: "12", or "12_3" for array tasks (Slurm's notation); 10 wide holds 123456_999.
constexpr const char* kRow = "{:>10}  {:<10} {:<16} {:<10} {:<9} {:>8}  {}\n";

std::string GpusColumn(const sched::Request& g) {
  std::string out = std::to_string(g.count);
  if (g.mem_bytes) out += "x" + FormatBytes(*g.mem_bytes);
  return out;
}

std::string WhereOrWhy(const store::Job& job, const std::vector<unsigned>& gpu_indices) {
  if (job.state == store::JobState::kRunning && !gpu_indices.empty()) {
    std::string out;
    for (unsigned i : gpu_indices) out += fmt::format("{}GPU{}", out.empty() ? "" : ",", i);
    return out;
  }
  if (job.exit_code && job.state != store::JobState::kRunning)
    return fmt::format("exit {}{}", *job.exit_code, job.reason.empty() ? "" : "; " + job.reason);
  return job.reason;
}

}  // namespace

std::string QueueTableHeader() { return fmt::format(kRow, "ID", "USER", "NAME", "GPUS", "STATE", "AGE", "WHERE / WHY"); }

void AppendQueueRow(const store::Job& job, const std::vector<unsigned>& gpu_indices, double now, std::string& out) {
  std::string name = job.spec.name;
  if (name.size() > 16) name = name.substr(0, 15) + "~";
  fmt::format_to(std::back_inserter(out), kRow, store::JobIdText(job), job.user, name, GpusColumn(job.spec.request),
                 store::StateName(job.state), FormatSeconds(now - job.submit_time), WhereOrWhy(job, gpu_indices));
}

}  // namespace gpulane
