#include "lease/waiter.h"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fmt/format.h>

#include "gpu/visible_devices.h"
#include "lease/occupancy.h"
#include "os/process_table.h"
#include "sched/policy.h"
#include "util/strings.h"
#include "util/units.h"

namespace gpulane::lease {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Requests granted in the same decision start in line order: a later one lets the earlier ones take
// their leases first (they do within milliseconds of the change that freed the GPUs), but waits no
// longer than this for one that does not act (a stopped gpulane, one whose NVML view lags).
constexpr double kMaxDeferS = 2.0;

std::string Ordinal(unsigned n) {
  const char* suffix = (n % 100 >= 11 && n % 100 <= 13) ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
  return fmt::format("{}{}", n, suffix);
}

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

LeaseWaiter::LeaseWaiter(GpuBackend& backend, const LeaseDir& dir, WaitRequest request, std::string job_id,
                         std::string command, std::function<void(const std::string&)> on_status)
    : backend_(backend), dir_(dir), request_(std::move(request)), on_status_(std::move(on_status)) {
  record_.job_id = std::move(job_id);
  record_.pid = getpid();
  record_.command = std::move(command);
  record_.uid = request_.owner_uid.value_or(geteuid());
  record_.user = UserNameOf(record_.uid);
}

Result<GpuSnapshot> LeaseWaiter::ReadSnapshot() {
  auto snapshot = backend_.Read(DecisionReadOptions(request_.request));
  if (!snapshot) return snapshot;
  ProcfsProcessTable table;
  AnnotateProcesses(*snapshot, table);
  return snapshot;
}

std::string LeaseWaiter::StatusLine(const std::vector<std::string>& reasons, unsigned position) const {
  return fmt::format("waiting, {} in line: {}", Ordinal(position), Join(reasons, "; "));
}

Status LeaseWaiter::JoinLine() {
  if (held_ticket_.held()) return Status::Ok();
  ticket_.request = request_.request;
  ticket_.request.uid = record_.uid;
  ticket_.request.user = record_.user;
  ticket_.seq = request_.seq;
  ticket_.pid = getpid();
  DirLock lock = dir_.Lock();
  auto created = dir_.CreateTicket(ticket_);
  if (!created) return created.error();
  held_ticket_ = std::move(created).value();
  return Status::Ok();
}

Status LeaseWaiter::NarrowTicket(std::vector<std::string> allowed_uuids) {
  if (ticket_.request.allowed_uuids == allowed_uuids) return Status::Ok();
  // Joined early with any GPU allowed; now that the GPUs are known, narrow it down.
  ticket_.request.allowed_uuids = std::move(allowed_uuids);
  DirLock lock = dir_.Lock();
  return held_ticket_.Rewrite(ToJson(ticket_).dump());
}

std::optional<sched::Decision> LeaseWaiter::Decide(const GpuSnapshot& snapshot, ProcessTable& table, bool* earlier_granted) {
  DirContents contents = dir_.Read();
  Occupancy occupancy = BuildOccupancy(snapshot, contents.leases, table);
  auto decisions = sched::Schedule(std::move(occupancy.gpus), LineOf(contents.tickets), sched::Limits{request_.margin_bytes});
  *earlier_granted = false;
  for (std::size_t i = 0; i < contents.tickets.size(); ++i) {
    if (contents.tickets[i].id == ticket_.id) return std::move(decisions[i]);
    *earlier_granted = *earlier_granted || decisions[i].granted;
  }
  return std::nullopt;
}

Result<Grant> LeaseWaiter::Acquire() {
  const auto start = Clock::now();
  auto snapshot = ReadSnapshot();
  if (!snapshot) return snapshot.error();
  auto snapshot_time = Clock::now();
  auto allowed = ResolveAllowedGpus(request_.request.gpu_list, request_.visible_devices, *snapshot);
  if (!allowed) return allowed.error();
  SignalWatch signals(request_.extra_signals);
  if (Status joined = JoinLine(); !joined.ok()) return joined.error();
  if (Status narrowed = NarrowTicket(*allowed); !narrowed.ok()) return narrowed.error();
  const sched::Request& request = ticket_.request;
  const unsigned gpu_count = static_cast<unsigned>(snapshot->devices.size());
  ProcfsProcessTable table;
  std::string last_status;
  bool first = true;
  std::optional<Clock::time_point> deferred_since;
  auto interrupted = [&](int sig) {
    Grant g;
    g.interrupted_by_signal = sig;
    if (on_status_ && !last_status.empty()) on_status_("");
    return g;
  };
  while (true) {
    std::optional<sched::Decision> mine;
    bool defer = false;
    {
      DirLock lock = dir_.Lock();
      bool earlier_granted = false;
      mine = Decide(*snapshot, table, &earlier_granted);
      if (!mine) return MakeError(ErrorKind::kIo, "this request's ticket vanished from the lease directory; try again");
      // Requests granted in the same decision start in line order (not for --no-wait: it answers now).
      if (mine->granted && earlier_granted && !request_.no_wait) {
        if (!deferred_since) deferred_since = Clock::now();
        defer = SecondsSince(*deferred_since) < kMaxDeferS;
      } else {
        deferred_since.reset();
      }
      if (mine->granted && !defer) {
        record_.started_s = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
        record_.gpus.clear();
        for (unsigned i : mine->gpus) record_.gpus.push_back({snapshot->devices[i].uuid, request.mem_bytes});
        auto lease = dir_.CreateLease(record_, request_.owner_uid, request_.owner_gid);
        if (!lease) return lease.error();
        held_ticket_.Release();
        if (on_status_ && !last_status.empty()) on_status_("");
        return Grant{mine->gpus, std::move(lease).value(), std::move(*snapshot), SecondsSince(start), 0};
      }
    }
    if (defer) {
      if (dir_.StartWatching()) continue;  // look again now that changes will wake us
      // Until an earlier request's lease or ticket changes the directory.
      pollfd fds[2] = {{dir_.watch_fd(), POLLIN, 0}, {signals.fd(), POLLIN, 0}};
      poll(fds, 2, 20);
      if (fds[1].revents & POLLIN) return interrupted(signals.Take());
      dir_.DrainEvents();
      continue;
    }
    if (mine->impossible)
      return MakeError(first ? ErrorKind::kInvalidArgument : ErrorKind::kNotEnoughGpus,
                       sched::ImpossibleReason(request, *mine, gpu_count));
    if (request_.no_wait) return sched::GrantedNow(request, *mine, gpu_count).error();
    first = false;
    std::string status = StatusLine(mine->reasons, mine->position);
    if (status != last_status && on_status_ && !request_.quiet) on_status_(status);
    last_status = status;

    if (dir_.StartWatching()) continue;  // look again now that changes will wake us
    // Sleep until a lease or ticket changes, a signal comes, NVML is due, or time runs out.
    double wait_s = std::max(0.0, request_.nvml_poll_s - SecondsSince(snapshot_time));
    if (request_.timeout_s) {
      double left = *request_.timeout_s - SecondsSince(start);
      if (left <= 0)
        return MakeError(ErrorKind::kTimeout, fmt::format("gave up after {} (--timeout): {}", FormatSeconds(SecondsSince(start)),
                                                          Join(mine->reasons, "; ")));
      wait_s = std::min(wait_s, left);
    }
    pollfd fds[2] = {{dir_.watch_fd(), POLLIN, 0}, {signals.fd(), POLLIN, 0}};
    int timeout_ms = dir_.watch_fd() < 0 ? std::min(50, static_cast<int>(wait_s * 1000)) : static_cast<int>(std::ceil(wait_s * 1000));
    poll(fds, 2, timeout_ms);
    if (fds[1].revents & POLLIN) return interrupted(signals.Take());
    dir_.DrainEvents();
    if (SecondsSince(snapshot_time) >= request_.nvml_poll_s) {
      auto fresh = ReadSnapshot();
      if (!fresh) return fresh.error();
      snapshot = std::move(fresh);
      snapshot_time = Clock::now();
    }
  }
}

void LeaseWaiter::RecordProcessGroup(HeldFile& lease, pid_t pgid) {
  record_.pgid = pgid;
  DirLock lock = dir_.Lock();
  lease.Rewrite(ToJson(record_).dump());
}

bool LeaseWaiter::CheckGpusReleased(const std::vector<unsigned>& gpus, const std::set<pid_t>& job_pids) {
  std::vector<std::string> left;
  const auto start = Clock::now();
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
    usleep(20000);
  } while (SecondsSince(start) < 1.0);
  fmt::print(stderr, "gpulane: warning: the job's processes are still listed on its GPUs after it ended ({}); "
                     "check with nvidia-smi\n",
             Join(left, ", "));
  return false;
}

}  // namespace gpulane::lease
