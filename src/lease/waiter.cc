#include "lease/waiter.h"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>

#include "gpu/visible_devices.h"
#include "lease/claimed_line.h"
#include "lease/decision_inputs.h"
#include "lease/occupancy.h"
#include "os/process_table.h"
#include "os/user_groups.h"
#include "sched/partition.h"
#include "sched/user_limits.h"
#include "sched/policy.h"
#include "sched/preemption.h"
#include "util/strings.h"
#include "util/say.h"
#include "util/units.h"
#include "util/week_window.h"

namespace gpulane::lease {

void ApplyConfig(const Config& config, WaitRequest& w) {
  w.nvml_poll_s = config.nvml_poll_s;
  w.margin_bytes = config.memory_margin_bytes;
  w.partitions = config.partitions;
  w.policy = sched::ParsePolicy(config.sched_policy).value_or(sched::PolicyKind::kDefault);
  w.max_reserve_idle_s = config.max_reserve_idle_s;
  w.max_unclaimed_s = config.max_unclaimed_s;
  w.limits_config = config;
}

void AddUserLimits(const Config& config, const std::vector<LeaseRecord>& leases, const std::vector<TicketRecord>& tickets,
                   std::optional<std::uint32_t> newcomer_uid, unsigned gpu_count, sched::Limits& limits,
                   std::map<std::uint32_t, std::optional<unsigned>>* cache) {
  if (!sched::AnyLimits(config)) return;
  std::map<std::uint32_t, std::optional<unsigned>> local;
  if (!cache) cache = &local;
  auto add = [&](std::uint32_t uid) {
    auto it = cache->find(uid);
    if (it == cache->end())
      it = cache->emplace(uid, sched::LimitsOf(config, uid, UserNameOf(uid), GroupNamesOf(uid)).max_gpus).first;
    if (it->second) limits.max_gpus_by_uid[uid] = *it->second;
  };
  for (const TicketRecord& t : tickets) add(t.request.uid);
  if (newcomer_uid) add(*newcomer_uid);
  for (const LeaseRecord& lease : leases)
    if (lease.parent.empty())  // an unreadable lease naming no GPU holds them all
      limits.gpus_in_use_by_uid[lease.uid] += lease.every_gpu ? gpu_count : static_cast<unsigned>(lease.gpus.size());
}

void NoteFreeSince(std::vector<sched::GpuState>& gpus, double now_s, std::map<std::string, double>& first_seen_free_s) {
  for (sched::GpuState& g : gpus) {
    const bool free = !g.has_context && g.foreign.empty() && g.processes_known;
    if (!free) {
      first_seen_free_s.erase(g.uuid);
      continue;
    }
    g.free_since_s = first_seen_free_s.emplace(g.uuid, now_s).first->second;
  }
}

namespace {

// Requests granted in the same decision start in line order: a later one lets the earlier ones take
// their leases first (they do within milliseconds of the change that freed the GPUs), but waits no
// longer than this for one that does not act (a stopped gpulane, one whose NVML view lags).
constexpr double kMaxDeferS = 2.0;

// How often a change in the lease directory makes a waiting request look again (every lease and
// ticket read, a decision): kLookBurst changes at once, then kLooksPerS at most, the changes between
// two looks looked at together. Without a bound, a user rewriting a junk file there in a loop made
// every waiting request look as often as the file changed (issue 23, item 8: 43-63 % of a core
// each). A hand-over is a few changes after a quiet while: looked at at once.
constexpr double kLookBurst = 10;
constexpr double kLooksPerS = 50;

// SIGINT, SIGTERM and SIGHUP as a pollable descriptor while waiting.
class SignalWatch {
 public:
  explicit SignalWatch(const std::vector<int>& extra) {
    sigemptyset(&set_);
    for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set_, s);
    for (int s : extra) sigaddset(&set_, s);
    sigprocmask(SIG_BLOCK, &set_, &old_);
    fd_ = signalfd(-1, &set_, SFD_NONBLOCK | SFD_CLOEXEC);
  }
  ~SignalWatch() {
    if (fd_ >= 0) close(fd_);
    sigprocmask(SIG_SETMASK, &old_, nullptr);
  }
  int fd() const { return fd_; }
  int Take() {
    signalfd_siginfo info{};
    if (read(fd_, &info, sizeof info) == sizeof info) return static_cast<int>(info.ssi_signo);
    return 0;
  }

 private:
  sigset_t set_{}, old_{};
  int fd_ = -1;
};

}  // namespace

unsigned PollWaitEnv::WaitReadable(const std::vector<int>& fds, double timeout_s) {
  std::vector<pollfd> p;
  for (int fd : fds) p.push_back({fd, POLLIN, 0});
  const int timeout_ms = timeout_s <= 0 ? 0 : static_cast<int>(std::ceil(std::min(timeout_s, 3600.0) * 1000));
  if (poll(p.data(), p.size(), timeout_ms) <= 0) return 0;
  unsigned ready = 0;
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i].revents & POLLIN) ready |= 1u << i;
  return ready;
}

LeaseWaiter::LeaseWaiter(GpuBackend& backend, const LeaseDir& dir, WaitRequest request, std::string job_id,
                         std::string label, std::function<void(const std::string&)> on_status, WaitEnv& env,
                         ProcessTable& processes)
    : backend_(backend),
      dir_(dir),
      request_(std::move(request)),
      on_status_(std::move(on_status)),
      env_(env),
      processes_(processes) {
  record_.job_id = std::move(job_id);
  if (request_.job_text != record_.job_id && IsLeaseJobText(request_.job_text)) record_.job_text = request_.job_text;
  record_.pid = request_.lease_pid.value_or(getpid());
  record_.label = LabelForLease(std::move(label));  // bounded: every reader can read the lease
  record_.uid = request_.owner_uid.value_or(geteuid());
  record_.user = UserNameOf(record_.uid);
}

Result<GpuSnapshot> LeaseWaiter::ReadSnapshot() {
  auto snapshot = backend_.Read(DecisionReadOptions(request_.request));
  if (!snapshot) return snapshot;
  AnnotateProcesses(*snapshot, processes_);
  for (const auto& d : snapshot->devices)
    if (d.processes)
      for (const auto& p : *d.processes)
        if (p.user) seen_alive_.insert(p.pid);
  return snapshot;
}

std::string LeaseWaiter::StatusLine(const std::vector<std::string>& reasons, unsigned position) const {
  return fmt::format("waiting, {} in line: {}", Ordinal(position), Join(reasons, "; "));
}

void LeaseWaiter::SayStatus(std::string status, std::string& last_status) const {
  if (status != last_status && on_status_ && !request_.quiet) on_status_(status);
  last_status = std::move(status);
}

Status LeaseWaiter::JoinLine() {
  if (held_ticket_.held()) return Status::Ok();
  ticket_.request = request_.request;
  ticket_.request.uid = record_.uid;
  ticket_.request.user = record_.user;
  ticket_.seq = request_.seq;
  ticket_.pid = getpid();
  ticket_.job_text = JobText(record_);
  ticket_.label = record_.label;
  DirLock lock = dir_.Lock();
  if (request_.parent_job_id) {
    const DirContents contents = dir_.Read();
    if (const LeaseRecord* parent = FindParentLease(contents.leases, request_.parent_job_id,
                                                    static_cast<std::uint32_t>(getpid()), processes_)) {
      ticket_.parent = record_.parent = parent->name;
      for (const LeasedGpu& g : parent->gpus) parent_uuids_.push_back(g.uuid);
    }
  }
  auto created = dir_.CreateTicket(ticket_);
  if (!created) return created.error();
  held_ticket_ = std::move(created).value();
  return Status::Ok();
}

Status LeaseWaiter::NarrowTicket(std::vector<std::string> allowed_uuids, const GpuSnapshot& snapshot) {
  if (nested()) {
    std::vector<std::string> within;
    for (const auto& uuid : allowed_uuids)
      if (std::find(parent_uuids_.begin(), parent_uuids_.end(), uuid) != parent_uuids_.end()) within.push_back(uuid);
    allowed_uuids = std::move(within);
  }
  if (ticket_.request.allowed_uuids == allowed_uuids) return Status::Ok();
  // Every GPU is what the ticket allows already: leave the file as it is. Each write moves its
  // change time, which is as early as another user's ticket may stand in line (TrustTicket).
  const bool every_gpu = !ticket_.request.allowed_uuids && allowed_uuids.size() == snapshot.devices.size() &&
                         std::all_of(snapshot.devices.begin(), snapshot.devices.end(), [&](const GpuDevice& d) {
                           return !d.uuid.empty() &&
                                  std::find(allowed_uuids.begin(), allowed_uuids.end(), d.uuid) != allowed_uuids.end();
                         });
  if (every_gpu) return Status::Ok();
  // Joined early with any GPU allowed; now that the GPUs are known, narrow it down.
  ticket_.request.allowed_uuids = std::move(allowed_uuids);
  DirLock lock = dir_.Lock();
  return held_ticket_.Rewrite(ToJson(ticket_).dump());
}

Result<sched::Decision> LeaseWaiter::Decide(const GpuSnapshot& snapshot, ProcessTable& table, bool* earlier_granted) {
  const DirContents contents = dir_.Read();
  const double now_s = env_.WallS();
  auto in = GatherDecisionInputs(contents.leases, contents.tickets, snapshot, table, request_, now_s, free_since_s_,
                                 {ticket_.parent, &seen_alive_, std::nullopt, &max_gpus_cache_});
  if (!in) return in.error();
  const LineView* view = &in->view;
  // Its own ticket is the file it holds, known by its inode: any user can write a ticket with
  // this one's id, and must not hand it her decision.
  std::optional<std::size_t> self;
  for (std::size_t i = 0; i < view->tickets.size(); ++i)
    if (view->tickets[i].dev == ticket_.dev && view->tickets[i].ino == ticket_.ino) self = i;
  if (!self) return MakeError(ErrorKind::kIo, "this request's ticket vanished from the lease directory; try again");
  // A ticket granted and not claimed for sched.max_unclaimed loses its place (sched/unclaimed.h).
  LineDecision line = DecideLine(view->occupancy, view->tickets, in->limits, unclaimed_, self, now_s, request_.max_unclaimed_s);
  *earlier_granted = false;
  for (std::size_t i : line.order) {
    if (i == *self) break;
    *earlier_granted = *earlier_granted || line.decisions[i].granted;
  }
  sched::Decision mine = std::move(line.decisions[*self]);
  if (line.recheck_at_s && !mine.granted)
    mine.recheck_at_s = mine.recheck_at_s ? std::min(*mine.recheck_at_s, *line.recheck_at_s) : *line.recheck_at_s;
  return mine;
}

Result<const PartitionConfig*> LeaseWaiter::FindPartition() const {
  if (request_.request.partition.empty()) return static_cast<const PartitionConfig*>(nullptr);
  for (const auto& p : request_.partitions)
    if (p.name == request_.request.partition) return &p;
  return MakeError(ErrorKind::kInvalidArgument,
                   fmt::format("partition {} is not in this machine's config any more", request_.request.partition));
}

double LeaseWaiter::WeekNowS() const {
  const double wall_s = env_.WallS();
  const double whole_s = std::floor(wall_s);
  const double week_s = LocalWeekSeconds(static_cast<std::time_t>(whole_s)) + (wall_s - whole_s);
  return week_s >= kSecondsPerWeek ? week_s - kSecondsPerWeek : week_s;
}

Result<bool> LeaseWaiter::AwaitOpen(const PartitionConfig& partition, double start_s, int signal_fd) {
  while (!sched::IsOpen(partition, WeekNowS())) {
    if (request_.no_wait) return sched::RequireOpen(partition, WeekNowS()).error();
    if (on_status_ && !request_.quiet) on_status_(fmt::format("waiting: {}", sched::ClosedText(partition, WeekNowS())));
    auto change = sched::NextChange(partition, WeekNowS());
    double wait_s = change ? change->in_s : 60;
    if (request_.timeout_s) {
      const double left = *request_.timeout_s - (env_.MonotonicS() - start_s);
      if (left <= 0)
        return MakeError(ErrorKind::kTimeout, fmt::format("gave up after {} (--timeout): {}", FormatSeconds(env_.MonotonicS() - start_s),
                                                          sched::ClosedText(partition, WeekNowS())));
      wait_s = std::min(wait_s, left);
    }
    if (env_.WaitReadable({signal_fd}, wait_s) & 1u) return true;
  }
  return false;
}

Result<std::vector<std::string>> LeaseWaiter::AllowedUuids(const PartitionConfig* partition, const GpuSnapshot& snapshot) const {
  auto allowed = ResolveAllowedGpus(request_.request.gpu_list, request_.inherited, snapshot);
  if (!allowed || !partition) return allowed;
  sched::Request narrowed = request_.request;
  narrowed.allowed_uuids = *allowed;
  std::vector<std::string> uuids;
  for (const auto& d : snapshot.devices) uuids.push_back(d.uuid);
  if (Status s = sched::RestrictToPartition(*partition, narrowed, uuids); !s.ok()) return s.error();
  return *narrowed.allowed_uuids;
}

Result<GpuSnapshot> LeaseWaiter::JoinWithItsGpus(const PartitionConfig* partition) {
  if (Status joined = JoinLine(); !joined.ok()) return joined.error();
  auto snapshot = ReadSnapshot();
  if (!snapshot) return snapshot.error();
  auto allowed = AllowedUuids(partition, *snapshot);
  if (!allowed) return allowed.error();
  if (Status narrowed = NarrowTicket(*allowed, *snapshot); !narrowed.ok()) return narrowed.error();
  return snapshot;
}

Result<sched::Decision> LeaseWaiter::DecideNow(const GpuSnapshot& snapshot, const PartitionConfig* partition,
                                               double& deferred_since_s, bool& defer) {
  bool earlier_granted = false;
  auto mine = Decide(snapshot, processes_, &earlier_granted);
  if (!mine) return mine;
  // Requests granted in the same decision start in line order (not for --no-wait: it answers now).
  if (mine->granted && earlier_granted && !request_.no_wait) {
    if (deferred_since_s < 0) deferred_since_s = env_.MonotonicS();
    defer = env_.MonotonicS() - deferred_since_s < kMaxDeferS;
  } else {
    deferred_since_s = -1;
  }
  // Its partition closed while it waited in line: it starts nothing until it opens again.
  const bool preemptible = request_.request.preemptible != sched::Preemptible::kNo;
  if (mine->granted && partition && !preemptible && !sched::IsOpen(*partition, WeekNowS())) {
    if (request_.no_wait) return sched::RequireOpen(*partition, WeekNowS()).error();
    mine->granted = false;
    mine->reasons = {fmt::format("partition {} closed until {}", partition->name, sched::OpensText(*partition, WeekNowS()))};
    if (auto change = sched::NextChange(*partition, WeekNowS())) mine->recheck_at_s = env_.WallS() + change->in_s;
  }
  return mine;
}

Result<Grant> LeaseWaiter::TakeLease(const sched::Decision& mine, GpuSnapshot& snapshot, const PartitionConfig* partition,
                                     double start_s) {
  const sched::Request& request = ticket_.request;
  record_.started_s = env_.WallS();
  if (ticket_.seq > 0) record_.requested_s = request.submit_time_s;  // a queued job's (seq: a place key)
  record_.time_limit_s = request.time_limit_s;
  // Preempted sched.max_preemptions_per_job times: this attempt is not preempted again.
  record_.preemptible = sched::GivesWay(request, request_.limits_config.max_preemptions_per_job);
  record_.gpus.clear();
  for (unsigned i : mine.gpus) record_.gpus.push_back({mine.mig_uuid.value_or(snapshot.devices[i].uuid), request.mem_bytes});
  auto lease = dir_.CreateLease(record_, request_.owner_uid, request_.owner_gid);
  if (!lease) return lease.error();
  held_ticket_.Release();
  Grant grant{mine.gpus, std::move(lease).value(), std::move(snapshot), env_.MonotonicS() - start_s, 0, std::nullopt};
  if (partition) grant.partition_stop = sched::StopOf(*partition, WeekNowS());
  grant.mig_uuid = mine.mig_uuid;
  grant.unclaimed = unclaimed_;
  return grant;
}

Result<double> LeaseWaiter::SleepS(const sched::Decision& mine, bool defer, double start_s, double snapshot_time_s) const {
  double wait_s = std::max(0.0, request_.nvml_poll_s - (env_.MonotonicS() - snapshot_time_s));
  if (defer) wait_s = std::min(wait_s, 0.02);
  if (mine.recheck_at_s) wait_s = std::min(wait_s, std::max(0.0, *mine.recheck_at_s - env_.WallS()));
  if (request_.timeout_s && !defer) {
    const double left = *request_.timeout_s - (env_.MonotonicS() - start_s);
    if (left <= 0)
      return MakeError(ErrorKind::kTimeout, fmt::format("gave up after {} (--timeout): {}", FormatSeconds(env_.MonotonicS() - start_s),
                                                        Join(mine.reasons, "; ")));
    wait_s = std::min(wait_s, left);
  }
  if (dir_.watch_fd() < 0) wait_s = std::min(wait_s, 0.05);  // no inotify: look again soon
  return wait_s;
}

Result<Grant> LeaseWaiter::Acquire() {
  const double start = env_.MonotonicS();
  SignalWatch signals(request_.extra_signals);
  auto found = FindPartition();
  if (!found) return found.error();
  const PartitionConfig* partition = *found;  // outside its windows nothing is granted (sched/partition.h)
  // Closed at the start: wait outside the line (reserving nothing) until it opens. A preemptible
  // job may start while its partition is closed (it gives way to any job that needs its GPUs).
  if (partition && request_.request.preemptible == sched::Preemptible::kNo) {
    auto signalled = AwaitOpen(*partition, start, signals.fd());
    if (!signalled) return signalled.error();
    if (*signalled) {
      Grant g;
      g.interrupted_by_signal = signals.Take();
      if (on_status_) on_status_("");
      return g;
    }
  }
  auto snapshot = JoinWithItsGpus(partition);
  if (!snapshot) return snapshot.error();
  double snapshot_time = env_.MonotonicS();
  const sched::Request& request = ticket_.request;
  const unsigned gpu_count = static_cast<unsigned>(snapshot->devices.size());
  std::string last_status;
  bool first = true;
  double deferred_since_s = -1;  // monotonic; < 0: not deferring (a plain double: GCC 12 warns on the optional)
  auto done_waiting = [&] {
    if (on_status_ && !last_status.empty()) on_status_("");
  };
  auto interrupted = [&](int sig) {
    Grant g;
    g.interrupted_by_signal = sig;
    done_waiting();
    return g;
  };
  // A stop (Ctrl-Z, SIGSTOP) or a sleeping machine anywhere in a look, not only in its sleep, is
  // seen: each look is due by the previous one's start and its sleep, and a grant by its own start.
  double due_s = -1;  // monotonic; < 0: no look before
  while (true) {
    const double look_s = env_.MonotonicS();
    if (due_s >= 0) WarnIfLate(due_s);
    bool defer = false;
    Result<sched::Decision> mine = MakeError(ErrorKind::kInternal, "no decision");
    {
      DirLock lock = dir_.Lock();
      mine = DecideNow(*snapshot, partition, deferred_since_s, defer);
      if (!mine) return mine.error();
      if (mine->granted && !defer) {
        WarnIfLate(look_s);
        auto grant = TakeLease(*mine, *snapshot, partition, start);
        if (grant) done_waiting();
        return grant;
      }
    }
    if (!defer && mine->impossible)
      return MakeError(first ? ErrorKind::kInvalidArgument : ErrorKind::kNotEnoughGpus,
                       sched::ImpossibleReason(request, *mine, gpu_count));
    if (!defer && request_.no_wait) return sched::GrantedNow(request, *mine, gpu_count).error();
    if (!defer) {
      first = false;
      SayStatus(StatusLine(mine->reasons, mine->position), last_status);
    }
    if (dir_.StartWatching()) continue;  // look again now that changes will wake us
    // Sleep until a lease or ticket changes, a signal comes, the GPUs are due for a re-read, or
    // time runs out; a deferred grant looks again after a short while in any case.
    auto wait_s = SleepS(*mine, defer, start, snapshot_time);
    if (!wait_s) return wait_s.error();
    due_s = look_s + *wait_s;
    const unsigned ready = env_.WaitReadable({dir_.watch_fd(), signals.fd()}, *wait_s);
    if (ready & 2u) return interrupted(signals.Take());
    if ((ready & 1u) && SpaceOutLooks(signals.fd())) return interrupted(signals.Take());
    dir_.DrainEvents();
    if (env_.MonotonicS() - snapshot_time >= request_.nvml_poll_s) {
      auto fresh = ReadSnapshot();
      if (!fresh) return fresh.error();
      snapshot = std::move(fresh);
      snapshot_time = env_.MonotonicS();
    }
  }
}

bool LeaseWaiter::SpaceOutLooks(int signal_fd) {
  // A token bucket: kLookBurst looks at once, then kLooksPerS.
  const double now_s = env_.MonotonicS();
  look_tokens_ = look_tokens_at_s_ < 0 ? kLookBurst  // the first change: a full bucket
                 : std::min(kLookBurst, look_tokens_ + std::max(0.0, now_s - look_tokens_at_s_) * kLooksPerS);
  look_tokens_at_s_ = now_s;
  if (look_tokens_ >= 1) {
    look_tokens_ -= 1;
    return false;
  }
  const double wait_s = (1 - look_tokens_) / kLooksPerS;
  look_tokens_ = 0;  // the token that comes while it waits is this look's
  look_tokens_at_s_ = now_s + wait_s;
  return env_.WaitReadable({-1, signal_fd}, wait_s) & 2u;
}

void LeaseWaiter::WarnIfLate(double due_s) const {
  // It did not run for longer than a grant may stay unclaimed (stopped: Ctrl-Z, SIGSTOP; or the
  // machine slept): the requests behind it may have gone first (sched/unclaimed.h). Said once a time.
  const double late_s = env_.MonotonicS() - due_s;
  if (late_s < request_.max_unclaimed_s || request_.quiet) return;
  Say("gpulane: warning: this request did not run for {} while it waited in line (stopped, or the machine "
      "slept); a request that does not take the GPUs the line gives it within {} (sched.max_unclaimed) loses "
      "its place to the requests behind it\n",
      FormatSeconds(late_s), FormatSeconds(request_.max_unclaimed_s));
}

void LeaseWaiter::RecordProcessGroup(HeldFile& lease, pid_t pgid) {
  record_.pgid = pgid;
  DirLock lock = dir_.Lock();
  if (Status s = lease.Rewrite(ToJson(record_).dump()); !s.ok())
    Say("gpulane: warning: the job's process group is not in its lease ({}): processes that leave the "
        "job's process tree may count as foreign\n",
        s.error().message);
}

bool LeaseWaiter::CheckGpusReleased(const std::vector<unsigned>& gpus, const std::set<pid_t>& job_pids) {
  std::vector<std::string> left;
  const double start = env_.MonotonicS();
  do {
    left.clear();
    auto snapshot = backend_.Read(ReadOptions{false, false, false});
    if (!snapshot) return false;
    for (unsigned i : gpus) {
      const GpuDevice& d = snapshot->devices[i];
      if (!d.processes) continue;
      for (const auto& p : *d.processes)
        if (job_pids.count(static_cast<pid_t>(p.pid))) left.push_back(fmt::format("GPU{}: pid {}", i, p.pid));
    }
    if (left.empty()) return true;
    env_.WaitReadable({}, 0.02);
  } while (env_.MonotonicS() - start < 1.0);
  Say("gpulane: warning: the job's processes are still listed on its GPUs after it ended ({}); "
      "check with nvidia-smi\n",
      Join(left, ", "));
  return false;
}

}  // namespace gpulane::lease
