#include "render/queue_table.h"

#include <fmt/format.h>

#include "util/terminal_text.h"
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

std::string WhereOrWhyOfAttempt(const store::Job& job, const std::vector<unsigned>& gpu_indices) {
  if (job.state == store::JobState::kRunning && !gpu_indices.empty()) {
    std::string out;
    for (unsigned i : gpu_indices) out += fmt::format("{}GPU{}", out.empty() ? "" : ",", i);
    return out;
  }
  if (job.exit_code && job.state != store::JobState::kRunning)
    return fmt::format("exit {}{}", *job.exit_code, job.reason.empty() ? "" : "; " + job.reason);
  // A held job waits for one thing only: the command that lets it go ("held by alice: gpulane
  // release 12"; `submit --hold` stores no reason). One that says it already is left as it is.
  if (job.state == store::JobState::kHeld && job.reason.find("gpulane release") == std::string::npos)
    return fmt::format("{}: gpulane release {}", job.reason.empty() ? "held" : job.reason, store::JobIdText(job));
  return job.reason;
}

// A retried job's column starts with its retries used: "retry 1/3, GPU0" (requeues, after a
// preemption or a partition's close, use none: "requeued 1x, GPU0" when there were only those).
std::string WhereOrWhy(const store::Job& job, const std::vector<unsigned>& gpu_indices) {
  std::string out = WhereOrWhyOfAttempt(job, gpu_indices);
  if (job.attempts.empty()) return out;
  // A waiting retry's reason says it already ("retry 1 of 3 after exit code 1").
  if (job.state == store::JobState::kPending && out.rfind("retry ", 0) == 0) return out;
  const int failed = store::FailedAttempts(job);
  const int requeued = static_cast<int>(job.attempts.size()) - failed;
  std::string head = failed > 0 || job.spec.retries > 0 ? fmt::format("retry {}/{}", failed, job.spec.retries) : "";
  if (requeued > 0) head += fmt::format("{}requeued {}x", head.empty() ? "" : ", ", requeued);
  if (const int preempted = store::Preemptions(job); preempted > 0) head += fmt::format(" (preempted {}x)", preempted);
  return head + (out.empty() ? "" : ", " + out);
}

// The name as the column shows it: escaped for the terminal, and when longer than 16 bytes cut to
// 15 (never inside a character: the escaped text is well-formed UTF-8) with a "~".
std::string NameColumn(const std::string& name) {
  std::string out = EscapeForTerminal(name);
  if (out.size() <= 16) return out;
  std::size_t cut = 15;
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xc0) == 0x80) --cut;
  return out.substr(0, cut) + "~";
}

}  // namespace

const char* StateLabel(store::JobState state) {
  return state == store::JobState::kLaunching ? "waiting" : store::StateName(state);
}

std::string StateLabelOf(const std::string& name) {
  auto state = store::ParseState(name);
  return state ? StateLabel(*state) : name;
}

std::string QueueTableHeader() { return fmt::format(kRow, "ID", "USER", "NAME", "GPUS", "STATE", "AGE", "WHERE / WHY"); }

void AppendQueueRow(const store::Job& job, const std::vector<unsigned>& gpu_indices, double now, std::string& out) {
  // The client copies this text to a terminal as it comes: every field a user chose (the name, the
  // reason, which may quote a command) is escaped here (util/terminal_text.h).
  fmt::format_to(std::back_inserter(out), kRow, store::JobIdText(job), EscapeForTerminal(job.user()), NameColumn(job.spec.name),
                 GpusColumn(job.spec.request), StateLabel(job.state), FormatSeconds(now - job.submit_time_s()),
                 EscapeForTerminal(WhereOrWhy(job, gpu_indices)));
}

void AppendLineRow(const std::string& id, const std::string& user, const std::string& label, const sched::Request& request,
                   double waited_s, const std::string& why, std::string& out) {
  fmt::format_to(std::back_inserter(out), kRow, EscapeForTerminal(id), EscapeForTerminal(user), NameColumn(label),
                 GpusColumn(request), "waiting", FormatSeconds(waited_s), EscapeForTerminal(why));
}

void AppendRunningRow(const std::string& id, const std::string& user, const std::string& label,
                      const sched::Request& request, double age_s, const std::string& where, std::string& out) {
  fmt::format_to(std::back_inserter(out), kRow, EscapeForTerminal(id), EscapeForTerminal(user), NameColumn(label),
                 GpusColumn(request), "running", FormatSeconds(age_s), EscapeForTerminal(where));
}

}  // namespace gpulane
