#include "daemon/time_limit_watch.h"

#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include "lease/lease_dir.h"
#include "lease/lease_processes.h"
#include "os/proc_scan.h"
#include "os/process_table.h"
#include "os/user_groups.h"
#include "sched/lease_deadline.h"
#include "sched/user_limits.h"
#include "util/strings.h"
#include "util/units.h"

namespace gpulane::daemon {

TimeLimitWatch::TimeLimitWatch(Config config, ProcessTable& processes, std::function<void(const std::string&)> log)
    : config_(std::move(config)), processes_(processes), log_(std::move(log)) {}

const LimitsConfig& TimeLimitWatch::LimitsOfUid(std::uint32_t uid) {
  auto it = limits_.find(uid);
  if (it == limits_.end())
    it = limits_.emplace(uid, sched::LimitsOf(config_, uid, lease::UserNameOf(uid), GroupNamesOf(uid))).first;
  return it->second;
}

unsigned TimeLimitWatch::Check(const std::vector<lease::LeaseRecord>& leases, double now_s) {
  const uid_t self = geteuid();
  std::map<std::pair<std::uint64_t, std::uint64_t>, Seen> still;
  std::optional<std::vector<ProcEntry>> procs;  // read once, and only when a lease is due
  unsigned acted = 0;
  for (const lease::LeaseRecord& lease : leases) {
    if (lease.ino == 0 || (self != 0 && lease.uid != self)) continue;
    const std::pair<std::uint64_t, std::uint64_t> key{lease.dev, lease.ino};
    Seen seen = seen_.count(key) ? seen_.at(key) : Seen{now_s, std::nullopt};
    // Unreadable leases say nothing of their start: counted from the first sight.
    const double started_s = lease.unreadable.empty() ? lease.started_s : now_s;
    const auto deadline =
        sched::OutsideDeadline(started_s, lease.time_limit_s, seen.first_seen_s, LimitsOfUid(lease.uid), config_.kill_grace_s);
    if (deadline) {
      const sched::LimitAction action = sched::ActionAt(*deadline, now_s, seen.termed_at_s, config_.kill_grace_s);
      if (action != sched::LimitAction::kNone) {
        if (!procs) procs = ListProcesses();
        std::vector<pid_t> pids = lease::ProcessesOfLease(lease, *procs, processes_);
        std::erase_if(pids, [](pid_t p) { return p <= 1 || p == getpid(); });
        const int sig = action == sched::LimitAction::kTerm ? SIGTERM : SIGKILL;
        // Logged before the signals: whoever sees the job end (its own side, a test) finds the line.
        std::vector<std::string> listed;
        for (pid_t p : pids) listed.push_back(std::to_string(p));
        log_(fmt::format("time limit: {}'s lease {} (job {}) started {} ago and is past its time limit of {} ({}) and "
                         "its kill grace of {}; its own side did not end it: {} to {}",
                         lease.user, lease.name, lease::JobText(lease), FormatSeconds(now_s - deadline->start_s),
                         FormatSeconds(deadline->limit_s), deadline->source, FormatSeconds(config_.kill_grace_s),
                         sig == SIGTERM ? "SIGTERM" : "SIGKILL",
                         pids.empty() ? std::string("no process of hers found") : "pids " + Join(listed, ", ")));
        for (pid_t p : pids) kill(p, sig);
        seen.termed_at_s = now_s;  // a lease still alive one grace after a SIGKILL gets another
        ++acted;
      }
    }
    still[key] = seen;
  }
  seen_ = std::move(still);
  return acted;
}

}  // namespace gpulane::daemon
