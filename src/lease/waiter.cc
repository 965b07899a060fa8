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
  // Only what the decision needs: memory and processes always; utilisation for --max-util and
  // --order util (a GPU that qualifies runs nobody else's work, so its load would not tell GPUs
  // apart); NVLink for multi-GPU requests. Each NVML query costs milliseconds the first time.
  ReadOptions options;
  options.sensors = false;
  options.utilization = request_.ticket.max_util_pct.has_value() || request_.ticket.order == "util";
  options.topology = request_.ticket.count > 1;
  auto snapshot = backend_.Read(options);
  if (!snapshot) return snapshot;
  ProcfsProcessTable table;
  AnnotateProcesses(*snapshot, table);
  return snapshot;
}

Result<std::vector<std::string>> LeaseWaiter::AllowedUuids(const GpuSnapshot& snapshot) {
  const auto& inherited = request_.visible_devices;
  VisibleDevices visible = ParseCudaVisibleDevices(inherited ? std::optional<std::string_view>(*inherited) : std::nullopt, snapshot);
  std::vector<unsigned> allowed;
  for (const auto& d : snapshot.devices)
    if (visible.Allows(d.pci_index)) allowed.push_back(d.pci_index);
  if (!request_.gpu_list.empty()) {
    std::string error;
    VisibleDevices listed = ParseGpuList(request_.gpu_list, snapshot, &error);
    if (!error.empty())
      return MakeError(ErrorKind::kInvalidArgument, fmt::format("--gpus {}: {}", request_.gpu_list, error));
    std::vector<unsigned> both;
    for (unsigned i : listed.pci_indices)
      if (visible.Allows(i)) both.push_back(i);
    allowed = both;
  }
  std::vector<std::string> uuids;
  for (unsigned i : allowed) uuids.push_back(snapshot.devices[i].uuid);
  return uuids;
}

std::string LeaseWaiter::StatusLine(const std::vector<std::string>& reasons, unsigned position) const {
  return fmt::format("waiting, {} in line: {}", Ordinal(position), Join(reasons, "; "));
}

Status LeaseWaiter::JoinLine(std::vector<std::string> allowed_uuids) {
  if (held_ticket_.held()) return Status::Ok();
  TicketRecord& ticket = request_.ticket;
  ticket.allowed_uuids = std::move(allowed_uuids);
  ticket.pid = getpid();
  ticket.uid = record_.uid;
  ticket.user = record_.user;
  DirLock lock = dir_.Lock();
  auto created = dir_.CreateTicket(ticket);
  if (!created) return created.error();
  held_ticket_ = std::move(created).value();
  return Status::Ok();
}

Result<Grant> LeaseWaiter::Acquire() {
  const auto start = Clock::now();
  auto snapshot = ReadSnapshot();
  if (!snapshot) return snapshot.error();
  auto snapshot_time = Clock::now();
  auto allowed = AllowedUuids(*snapshot);
  if (!allowed) return allowed.error();
  TicketRecord& ticket = request_.ticket;
  SignalWatch signals(request_.extra_signals);
  HeldFile& held_ticket = held_ticket_;
  if (!held_ticket.held()) {
    Status joined = JoinLine(*allowed);
    if (!joined.ok()) return joined.error();
  } else if (ticket.allowed_uuids != *allowed) {
    // Joined early with any GPU allowed; now that the GPUs are known, narrow it down.
    ticket.allowed_uuids = *allowed;
    DirLock lock = dir_.Lock();
    Status s = held_ticket.Rewrite(ToJson(ticket).dump());
    if (!s.ok()) return s.error();
  }
  ProcfsProcessTable table;
  std::string last_status;
  bool first = true;
  std::optional<Clock::time_point> deferred_since;
  while (true) {
    std::optional<sched::Decision> mine;
    bool defer = false;
    {
      DirLock lock = dir_.Lock();
      DirContents contents = dir_.Read();
      auto states = BuildGpuStates(*snapshot, contents.leases, table);
      std::vector<sched::Request> line;
      for (const auto& t : contents.tickets) line.push_back(ToRequest(t, *snapshot));
      auto decisions = sched::Schedule(states, line, sched::Limits{request_.margin_bytes});
      bool earlier_granted = false;
      for (auto& d : decisions) {
        if (d.id == ticket.id) {
          mine = std::move(d);
          break;
        }
        earlier_granted = earlier_granted || d.granted;
      }
      if (!mine) return MakeError(ErrorKind::kIo, "this request's ticket vanished from the lease directory; try again");
      if (mine->granted && earlier_granted) {
        if (!deferred_since) deferred_since = Clock::now();
        defer = SecondsSince(*deferred_since) < kMaxDeferS;
      } else {
        deferred_since.reset();
      }
      if (mine->granted && !defer) {
        record_.started_s = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
        record_.gpus.clear();
        for (unsigned i : mine->gpus) record_.gpus.push_back({snapshot->devices[i].uuid, ticket.mem_bytes});
        auto lease = dir_.CreateLease(record_, request_.owner_uid, request_.owner_gid);
        if (!lease) return lease.error();
        held_ticket.Release();
        if (on_status_ && !last_status.empty()) on_status_("");
        return Grant{mine->gpus, std::move(lease).value(), std::move(*snapshot), SecondsSince(start), 0};
      }
    }
    if (defer) {
      if (dir_.StartWatching()) continue;  // look again now that changes will wake us
      // Until an earlier request's lease or ticket changes the directory.
      pollfd fds[2] = {{dir_.watch_fd(), POLLIN, 0}, {signals.fd(), POLLIN, 0}};
      poll(fds, 2, 20);
      if (fds[1].revents & POLLIN) {
        Grant interrupted;
        interrupted.interrupted_by_signal = signals.Take();
        if (on_status_ && !last_status.empty()) on_status_("");
        return interrupted;
      }
      dir_.DrainEvents();
      continue;
    }
    if (mine->impossible) {
      const ErrorKind kind = first ? ErrorKind::kInvalidArgument : ErrorKind::kNotEnoughGpus;
      std::vector<std::string> never;
      for (const auto& reason : mine->reasons)
        if (reason.find("leased by") == std::string::npos && reason.find("in use by") == std::string::npos) never.push_back(reason);
      return MakeError(kind, fmt::format("asked for {} GPU{}{} but only {} of the {} GPUs here can ever qualify{}: ask "
                                         "for fewer{}",
                                         ticket.count, ticket.count > 1 ? "s" : "",
                                         ticket.mem_bytes ? fmt::format(" with {} each", FormatBytes(*ticket.mem_bytes)) : "",
                                         mine->possible, snapshot->devices.size(),
                                         never.empty() ? "" : " (" + Join(never, "; ") + ")",
                                         ticket.mem_bytes ? " or less memory" : ""));
    }
    if (request_.no_wait)
      return MakeError(ErrorKind::kNotEnoughGpus,
                       fmt::format("no suitable GPUs free now (--no-wait): {}", Join(mine->reasons, "; ")));
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
    if (fds[1].revents & POLLIN) {
      Grant interrupted;
      interrupted.interrupted_by_signal = signals.Take();
      if (on_status_ && !last_status.empty()) on_status_("");
      return interrupted;
    }
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
