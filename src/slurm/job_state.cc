#include "slurm/job_state.h"

#include <fmt/format.h>

#include "util/strings.h"

namespace gpulane::slurm {
namespace {

std::vector<std::string> SplitFields(const std::string& line) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  while (true) {
    const std::size_t bar = line.find('|', start);
    fields.push_back(line.substr(start, bar == std::string::npos ? std::string::npos : bar - start));
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  return fields;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) lines.push_back(std::move(line));
    start = end + 1;
  }
  return lines;
}

std::optional<int> Number(const std::string& text) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoi(text);
}

std::string Trim(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  std::size_t first = s.find_first_not_of(' ');
  return first == std::string::npos ? "" : s.substr(first);
}

bool In(const std::string& word, std::initializer_list<const char*> words) {
  for (const char* w : words)
    if (word == w) return true;
  return false;
}

}  // namespace

Result<std::vector<SlurmJobRow>> ParseSqueue(const std::string& text) {
  std::vector<SlurmJobRow> rows;
  for (const auto& line : Lines(text)) {
    auto f = SplitFields(line);
    if (f.size() < 9) return MakeError(ErrorKind::kInternal, fmt::format("squeue printed an unexpected line: {}", line));
    for (auto& field : f) field = Trim(field);
    SlurmJobRow row;
    row.id = f[0];
    row.job_id = f[3];
    row.state = f[4];
    row.reason = f[5];
    // exit_code is the wait status (exit << 8 | signal); squeue prints it for finished jobs only.
    if (auto status = Number(f[6])) {
      if ((*status & 0x7f) != 0) row.signal = *status & 0x7f;
      else row.exit_code = (*status >> 8) & 0xff;
    }
    row.partition = f[7];
    row.nodes = f[8];
    rows.push_back(std::move(row));
  }
  return rows;
}

Result<std::vector<SlurmJobRow>> ParseSacct(const std::string& text) {
  std::vector<SlurmJobRow> rows;
  for (const auto& line : Lines(text)) {
    auto f = SplitFields(line);
    if (f.size() < 6) return MakeError(ErrorKind::kInternal, fmt::format("sacct printed an unexpected line: {}", line));
    if (f[0].find('.') != std::string::npos) continue;  // a step: 1234.batch, 1234.0
    SlurmJobRow row;
    row.id = f[0];
    row.job_id = f[0];
    row.state = f[1].substr(0, f[1].find(' '));  // "CANCELLED by 1000"
    const std::size_t colon = f[2].find(':');
    if (colon != std::string::npos) {
      auto code = Number(f[2].substr(0, colon));
      auto signal = Number(f[2].substr(colon + 1));
      if (signal && *signal != 0) row.signal = *signal;
      else if (code) row.exit_code = *code;
    }
    row.reason = f[3];
    row.partition = f[4];
    row.nodes = f[5];
    rows.push_back(std::move(row));
  }
  return rows;
}

JobView MapSlurmState(const SlurmJobRow& row) {
  const std::string& s = row.state;
  const std::string why = row.reason.empty() || row.reason == "None" ? "" : row.reason;
  JobView v;
  auto final_code = [&]() -> std::optional<int> {
    if (row.signal) return 128 + *row.signal;
    return row.exit_code;
  };
  if (s == "PENDING") {
    if (In(why, {"JobHeldUser", "JobHeldAdmin"})) {
      v.state = "held";
      v.reason = fmt::format("held (Slurm: {}); gpulane release slurm:{} releases it", why, row.id);
    } else if (why == "DependencyNeverSatisfied") {
      v.state = "cancelled";
      v.reason = "its dependency failed; it will never start (Slurm: DependencyNeverSatisfied; scancel it)";
      v.finished = true;
    } else {
      v.state = "pending";
      v.reason = why == "Resources"    ? "waiting for GPUs (Slurm: Resources)"
                 : why == "Dependency" ? "waiting for its dependencies (Slurm: Dependency)"
                 : why == "Priority"   ? "waiting for jobs ahead of it (Slurm: Priority)"
                 : why.empty()         ? "waiting in Slurm's queue"
                                       : fmt::format("waiting (Slurm: {})", why);
    }
    return v;
  }
  if (In(s, {"REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"})) {
    v.state = s == "REQUEUE_HOLD" ? "held" : "pending";
    v.reason = fmt::format("requeued by Slurm ({})", s);
    return v;
  }
  if (In(s, {"CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "STAGE_OUT", "RESIZING", "SIGNALING", "STOPPED"})) {
    v.state = "running";
    v.ran = true;
    if (s != "RUNNING") v.reason = fmt::format("Slurm: {}", s);
    return v;
  }
  v.finished = true;
  v.ran = true;
  v.exit_code = final_code();
  if (s == "COMPLETED") {
    v.state = "completed";
    if (!v.exit_code) v.exit_code = 0;
  } else if (s == "TIMEOUT") {
    v.state = "timeout";
    v.reason = "stopped at its time limit (Slurm: TIMEOUT)";
  } else if (In(s, {"CANCELLED", "PREEMPTED", "REVOKED"})) {
    v.state = "cancelled";
    v.reason = s == "PREEMPTED" ? "preempted by Slurm (PREEMPTED)" : fmt::format("Slurm: {}", s);
    // squeue gives every job an exit code (0 for one cancelled while pending): it ran only when it
    // was given a node or ended by a signal or a non-zero status; one that never ran has no code.
    v.ran = row.signal.has_value() || (row.exit_code && *row.exit_code != 0) ||
            (!row.nodes.empty() && row.nodes != "None assigned");
    if (!v.ran) v.exit_code.reset();
  } else if (In(s, {"FAILED", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT"})) {
    v.state = "failed";
    v.reason = s == "NODE_FAIL"       ? "its node failed (Slurm: NODE_FAIL)"
               : s == "OUT_OF_MEMORY" ? "out of host memory (Slurm: OUT_OF_MEMORY)"
               : s == "FAILED"        ? (why.empty() ? "" : fmt::format("Slurm: {}", why))
                                      : fmt::format("Slurm: {}", s);
    if (!v.exit_code || *v.exit_code == 0) v.exit_code = s == "OUT_OF_MEMORY" ? 137 : 1;  // failed, whatever it said
  } else {
    v.state = "running";  // a state this gpulane does not know: not finished, not a failure
    v.finished = false;
    v.ran = false;
    v.exit_code.reset();
    v.reason = fmt::format("Slurm: {}", s);
  }
  return v;
}

JobView ViewFromExitFile(int exit_code, bool slurm_gone) {
  JobView v;
  v.state = exit_code == 0 ? "completed" : "failed";
  v.exit_code = exit_code;
  v.finished = true;
  v.ran = true;
  v.reason = slurm_gone ? "exit code from its batch script (Slurm no longer lists the job)"
                        : "its command ended (exit code from its batch script; Slurm has not caught up yet)";
  return v;
}

}  // namespace gpulane::slurm
