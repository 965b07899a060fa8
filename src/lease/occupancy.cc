#include "lease/occupancy.h"
#include "lease/line_shares.h"

#include <algorithm>

#include <fmt/format.h>

namespace gpulane::lease {
namespace {

// Whether a process runs `gpulane _lease` (argv[0] named gpulane, argv[1] "_lease").
bool IsLeaseCommand(const std::optional<ProcessInfo>& info) {
  if (!info || info->command != "gpulane") return false;
  const std::size_t space = info->cmdline.find(' ');
  if (space == std::string::npos || info->cmdline.compare(space, 7, " _lease") != 0) return false;
  return info->cmdline.size() == space + 7 || info->cmdline[space + 7] == ' ';
}

// The GPUs of `lease` that are `uuid` (one, or more when a file names it twice): an unreadable
// lease that names none holds every GPU exclusively.
std::vector<LeasedGpu> EntriesFor(const LeaseRecord& lease, const std::string& uuid) {
  if (lease.every_gpu) return {LeasedGpu{uuid, std::nullopt}};
  std::vector<LeasedGpu> out;
  for (const LeasedGpu& g : lease.gpus)
    if (g.uuid == uuid) out.push_back(g);
  return out;
}

// The process a lease's job descends from: the supervisor its file names when the kernel confirms
// it, being the process that holds the file's lock or a descendant of it; else 0 (none: the lease
// owns processes through its job's process group alone). A "pid" written in the file is only its
// owner's word: the common ancestor of other users' processes (sshd, a shell's parent) is no
// supervisor of hers.
//
// Or the holder's parent, when the holder is a `gpulane _lease` (what the Python package's lease()
// runs: the Python process that started it and that process's children are the job), the file
// names that parent and it is the lease owner's process. Its command line is the owner's word too,
// but it gains her nothing `gpulane _lease` itself would not: only her own processes, and only
// those under the process that started the holder. Any other holder vouches for no parent.

std::vector<std::uint32_t> AnchorsOf(const std::vector<LeaseRecord>& leases, ProcessTable& table) {
  std::vector<std::uint32_t> anchors;
  anchors.reserve(leases.size());
  for (const LeaseRecord& lease : leases) anchors.push_back(AnchorOf(lease, table));
  return anchors;
}

// The real uid of a GPU process: as annotated with the snapshot, else asked now; nullopt unknown.
std::optional<std::uint32_t> UidOf(const GpuProcess& p, ProcessTable& table) {
  if (p.uid) return p.uid;
  if (auto info = table.Lookup(p.pid)) return info->uid;
  return std::nullopt;
}

// The lease whose job `pid` (of user `uid`) belongs to, or -1: among the leases of that user, the
// one whose anchor is the closest ancestor (or whose job's process group holds a process on the
// way up). Another user's lease never owns it, whatever its file says.
int OwnerOf(std::uint32_t pid, std::uint32_t uid, const std::vector<LeaseRecord>& leases,
            const std::vector<std::uint32_t>& anchors, ProcessTable& table) {
  for (int depth = 0; depth < 64 && pid > 1; ++depth) {
    for (std::size_t i = 0; i < leases.size(); ++i)
      if (anchors[i] == pid && leases[i].uid == uid) return static_cast<int>(i);
    auto links = table.Links(pid);
    if (!links) return -1;
    for (std::size_t i = 0; i < leases.size(); ++i)
      if (leases[i].pgid > 0 && links->pgid == static_cast<std::uint32_t>(leases[i].pgid) && leases[i].uid == uid)
        return static_cast<int>(i);
    pid = links->ppid;
  }
  return -1;
}

// Processes NVML lists on `d` whose pids /proc never showed (another PID namespace: inside a
// container NVML reports the host's pids, so every job's own processes look like this). Counted,
// without proof, as the leases' on this GPU whose jobs show no visible process on it, up to what
// those leases declared (a whole-GPU lease: everything); the rest are foreign. Said so in
// GpuState::unverified and Occupancy::outside: unknown is neither the job's nor foreign silently.
// On the host (ProcessTable::UnseenPidsMayBeOurs false) none is: every process shows there, and
// an unseen one belongs to another PID namespace, never to a job of ours.
void AttributeInvisible(const GpuDevice& d, const std::vector<const GpuProcess*>& invisible,
                        const std::vector<LeaseRecord>& leases, const std::vector<bool>& shows_a_process, bool may_be_ours,
                        sched::GpuState& g, std::vector<std::uint64_t>& used_by_lease, std::vector<OutsideProcess>& outside) {
  for (const GpuProcess* p : invisible) {
    const std::uint64_t mem = p->used_memory_bytes.value_or(0);
    std::optional<std::size_t> to;  // the first lease whose declaration it fits, or a whole-GPU lease
    for (std::size_t i = 0; may_be_ours && i < leases.size() && !to; ++i) {
      if (!leases[i].unreadable.empty() || shows_a_process[i]) continue;
      for (const LeasedGpu& lg : EntriesFor(leases[i], d.uuid))
        if (!lg.mem_bytes || used_by_lease[i] + mem <= *lg.mem_bytes) to = i;
    }
    if (!to) {
      g.foreign.push_back(DescribeProcess(*p));
      outside.push_back({d.pci_index, p->pid, DescribeProcess(*p), false, ""});
      continue;
    }
    used_by_lease[*to] += mem;
    std::string words = fmt::format("{}, counted as job {}'s (its own processes are not visible here either)",
                                    DescribeProcess(*p), JobText(leases[*to]));
    g.unverified.push_back(words);
    outside.push_back({d.pci_index, p->pid, std::move(words), false, leases[*to].name});
  }
}

void Classify(const GpuDevice& d, const std::vector<LeaseRecord>& leases, const std::vector<std::uint32_t>& anchors,
              ProcessTable& table, const OccupancyOptions& options, sched::GpuState& g, std::vector<std::uint64_t>& used_by_lease,
              Occupancy& out) {
  if (!d.processes) {
    g.processes_known = false;
    return;
  }
  std::vector<const GpuProcess*> invisible;
  std::vector<bool> shows_a_process(leases.size(), false);  // a lease whose job has a visible process here
  for (const GpuProcess& p : *d.processes) {
    const std::uint64_t mem = p.used_memory_bytes.value_or(0);
    if (!table.Links(p.pid)) {
      // Seen in /proc when the snapshot was annotated but gone now: it ended and NVML lags, so its
      // memory is as good as free. Never seen: it lives in another PID namespace (a container).
      const bool ended = p.user || (options.ended_pids && options.ended_pids->count(p.pid));
      if (ended) {
        if (g.free_bytes) *g.free_bytes += mem;
        continue;
      }
      g.has_context = true;
      if (p.mig_uuid) g.foreign.push_back(DescribeProcess(p));  // a MIG device's: judged by AddMigUnits
      else invisible.push_back(&p);
      continue;
    }
    g.has_context = true;
    const std::optional<std::uint32_t> uid = UidOf(p, table);
    const int owner = uid ? OwnerOf(p.pid, *uid, leases, anchors, table) : -1;
    // A process on a MIG device belongs to the lease of that MIG device (its GPU is never leased whole).
    if (owner >= 0 && (HoldsGpu(leases[owner], d.uuid) || (p.mig_uuid && HoldsGpu(leases[owner], *p.mig_uuid)))) {
      used_by_lease[owner] += mem;
      shows_a_process[owner] = true;
      continue;
    }
    if (owner >= 0) {
      const LeaseRecord& lease = leases[owner];
      out.strays.push_back({d.pci_index, p.pid, lease.job_id, JobText(lease), lease.name, lease.user});
      const std::string words = fmt::format("{} of job {}, which did not lease this GPU", DescribeProcess(p), JobText(lease));
      g.foreign.push_back(words);
      out.outside.push_back({d.pci_index, p.pid, words, true, ""});
      continue;
    }
    g.foreign.push_back(DescribeProcess(p));
    out.outside.push_back({d.pci_index, p.pid, DescribeProcess(p), true, ""});
  }
  AttributeInvisible(d, invisible, leases, shows_a_process, !invisible.empty() && table.UnseenPidsMayBeOurs(), g,
                     used_by_lease, out.outside);
}

// The MIG devices of `d` (MIG mode on) as units: held by the lease that names the MIG device, with
// the processes on it that lease does not account for as foreign.
void AddMigUnits(const GpuDevice& d, const std::vector<LeaseRecord>& leases, const std::vector<std::uint32_t>& anchors,
                 ProcessTable& table, const OccupancyOptions& options, const sched::GpuState& g,
                 std::vector<sched::MigUnit>& units) {
  if (!d.mig_enabled.value_or(false)) return;
  for (const MigDevice& m : d.mig_devices) {
    if (m.uuid.empty()) continue;
    sched::MigUnit u;
    u.gpu_index = d.pci_index;
    u.uuid = m.uuid;
    u.gpu_uuid = d.uuid;
    u.profile = m.profile;
    u.total_bytes = m.memory_total_bytes;
    u.gpu_usable = !d.failed();
    u.processes_known = g.processes_known;
    int holder = -1;
    for (std::size_t i = 0; i < leases.size(); ++i)
      if (HoldsGpu(leases[i], m.uuid)) {
        holder = static_cast<int>(i);
        u.holder = Describe(leases[i]);
      }
    if (d.processes)
      for (const GpuProcess& p : *d.processes) {
        if (p.mig_uuid != m.uuid) continue;
        if (!table.Links(p.pid)) {
          // As on a whole GPU (Classify): seen in /proc before and gone now, it ended; never seen,
          // it runs in another PID namespace and is foreign.
          const bool ended = p.user || (options.ended_pids && options.ended_pids->count(p.pid));
          if (!ended) u.foreign.push_back(DescribeProcess(p));
          continue;
        }
        const std::optional<std::uint32_t> uid = UidOf(p, table);
        const int owner = uid ? OwnerOf(p.pid, *uid, leases, anchors, table) : -1;
        if (owner < 0 || owner != holder) u.foreign.push_back(DescribeProcess(p));
      }
    units.push_back(std::move(u));
  }
}

sched::GpuState BaseState(const GpuDevice& d, const GpuSnapshot& snapshot) {
  sched::GpuState g;
  g.index = d.pci_index;
  g.uuid = d.uuid;
  if (d.failed()) g.usable = false, g.unusable_reason = fmt::format("failed ({})", *d.error);
  else if (d.mig_enabled.value_or(false)) g.usable = false, g.unusable_reason = "MIG mode on";
  else if (d.compute_mode == ComputeMode::kProhibited) g.usable = false, g.unusable_reason = "compute mode PROHIBITED";
  g.drained = d.drained;
  g.one_context_only = d.compute_mode == ComputeMode::kExclusiveProcess || d.compute_mode == ComputeMode::kExclusiveThread;
  g.total_bytes = d.memory_total_bytes;
  g.free_bytes = d.memory_free_bytes;
  g.reserved_bytes = d.memory_reserved_bytes;
  g.util_pct = d.utilization_gpu_pct;
  for (const auto& peer : d.nvlink_peers)
    for (const auto& other : snapshot.devices)
      if (other.pci_bus_id == peer.pci_bus_id && peer.links > 0) g.nvlink_peers.push_back(other.pci_index);
  return g;
}

}  // namespace

std::uint32_t AnchorOf(const LeaseRecord& lease, ProcessTable& table) {
  if (lease.holder <= 0 || lease.pid <= 1) return 0;
  const auto pid = static_cast<std::uint32_t>(lease.pid), holder = static_cast<std::uint32_t>(lease.holder);
  if (pid == holder || BelongsTo(table, pid, holder, 0)) return pid;
  const auto links = table.Links(holder);
  if (!links || links->ppid != pid || !IsLeaseCommand(table.Lookup(holder))) return 0;
  const auto parent = table.Lookup(pid);
  return parent && parent->uid == lease.uid ? pid : 0;
}

std::vector<std::vector<int>> ProcessOwners(const GpuSnapshot& snapshot, const std::vector<LeaseRecord>& leases,
                                            ProcessTable& processes) {
  const std::vector<std::uint32_t> anchors = AnchorsOf(leases, processes);
  std::vector<std::vector<int>> owners(snapshot.devices.size());
  for (std::size_t d = 0; d < snapshot.devices.size(); ++d) {
    const GpuDevice& dev = snapshot.devices[d];
    if (!dev.processes) continue;
    for (const GpuProcess& p : *dev.processes) {
      int owner = p.user ? kEndedProcess : -1;
      if (processes.Links(p.pid)) {
        const std::optional<std::uint32_t> uid = UidOf(p, processes);
        owner = uid ? OwnerOf(p.pid, *uid, leases, anchors, processes) : -1;
        if (owner >= 0 && !HoldsGpu(leases[owner], dev.uuid) && !(p.mig_uuid && HoldsGpu(leases[owner], *p.mig_uuid))) owner = -1;
      }
      owners[d].push_back(owner);
    }
  }
  return owners;
}

std::string DescribeProcess(const GpuProcess& p) {
  if (p.user) return fmt::format("{}'s {} (pid {})", *p.user, p.command.value_or("process"), p.pid);
  return fmt::format("pid {} (not visible here)", p.pid);
}

Occupancy BuildOccupancy(const GpuSnapshot& snapshot, const std::vector<LeaseRecord>& leases, ProcessTable& processes,
                         const OccupancyOptions& options) {
  Occupancy out;
  const std::vector<std::uint32_t> anchors = AnchorsOf(leases, processes);
  for (const GpuDevice& d : snapshot.devices) {
    sched::GpuState g = BaseState(d, snapshot);
    std::vector<std::uint64_t> used_by_lease(leases.size(), 0);
    Classify(d, leases, anchors, processes, options, g, used_by_lease, out);
    bool leased = false, every_end_known = true, every_lease_preemptible = true;
    double ends_s = 0;
    std::uint64_t preemptible_used = 0;
    const LeaseRecord* first_preemptible = nullptr;
    for (std::size_t i = 0; i < leases.size(); ++i) {
      if (&leases[i] == options.transparent) continue;
      for (const LeasedGpu& lg : EntriesFor(leases[i], d.uuid)) {
        g.has_context = true;
        leased = true;
        // A step nested in a job ends with it: it neither makes the GPU preemptible nor keeps it from being so.
        if (leases[i].parent.empty()) {
          if (!leases[i].preemptible) every_lease_preemptible = false;
          else if (!first_preemptible) first_preemptible = &leases[i];
        }
        preemptible_used += used_by_lease[i];
        if (leases[i].time_limit_s)
          ends_s = std::max(ends_s, leases[i].started_s + *leases[i].time_limit_s);
        else
          every_end_known = false;
        if (!lg.mem_bytes) {
          g.exclusive_holder = Describe(leases[i]);
        } else {
          ++g.shared_leases;
          if (*lg.mem_bytes > used_by_lease[i]) g.unallocated_reservation_bytes += *lg.mem_bytes - used_by_lease[i];
        }
      }
    }
    // Free again at the latest lease end when every lease on it has a time limit (backfill plans
    // against it, sched/policy.h); one without: unknown.
    if (leased && every_end_known) g.busy_until_s = ends_s;
    AddMigUnits(d, leases, anchors, processes, options, g, out.mig_units);
    // Held only by preemptible jobs, nothing else on it: a waiting job may have it by preemption.
    if (leased && every_lease_preemptible && first_preemptible && g.foreign.empty() && g.processes_known) {
      g.preemptible_holder = Describe(*first_preemptible);
      g.preemptible_used_bytes = preemptible_used;
    }
    out.gpus.push_back(std::move(g));
  }
  return out;
}

const LeaseRecord* FindParentLease(const std::vector<LeaseRecord>& leases, const std::optional<std::string>& job_id,
                                   std::uint32_t self_pid, ProcessTable& processes) {
  if (!job_id || job_id->empty()) return nullptr;
  const auto self = processes.Lookup(self_pid);
  if (!self) return nullptr;
  for (const LeaseRecord& lease : leases) {
    if (lease.job_id != *job_id || lease.uid != self->uid) continue;
    const std::uint32_t anchor = AnchorOf(lease, processes);
    if (anchor != 0 && BelongsTo(processes, self_pid, anchor, 0)) return &lease;
  }
  return nullptr;
}

std::vector<TicketRecord> TicketsOfLine(const std::vector<TicketRecord>& tickets, const std::string& parent) {
  std::vector<TicketRecord> out;
  for (const auto& t : tickets)
    if (t.parent == parent) out.push_back(t);
  return out;
}

Result<LineView> ViewOfLine(const std::vector<LeaseRecord>& leases, const std::vector<TicketRecord>& tickets,
                            const GpuSnapshot& snapshot, ProcessTable& processes, const std::string& parent_name,
                            const std::set<std::uint32_t>* ended_pids) {
  LineView view;
  if (!parent_name.empty()) {
    for (const LeaseRecord& lease : leases)
      if (IsNamed(lease, parent_name)) view.parent = &lease;
    if (!view.parent)
      return MakeError(ErrorKind::kNotFound, "the gpulane job this runs inside has ended (its lease is gone)");
  }
  view.occupancy = BuildOccupancy(snapshot, leases, processes, {view.parent, ended_pids});
  if (!view.parent) {
    view.tickets = TicketsOfLine(tickets, "");
  } else {
    for (const auto& t : tickets)  // under any name of its file
      if (!t.parent.empty() && IsNamed(*view.parent, t.parent)) view.tickets.push_back(t);
  }
  return view;
}

std::vector<std::string> WithinParent(std::vector<std::string> allowed, const LeaseRecord* parent) {
  if (!parent) return allowed;
  std::vector<std::string> out;
  for (const auto& uuid : allowed)
    for (const LeasedGpu& g : parent->gpus)
      if (g.uuid == uuid) out.push_back(uuid);
  return out;
}

sched::Request RequestOf(const TicketRecord& ticket, const std::vector<sched::GpuState>& gpus) {
  sched::Request r = ticket.request;
  if (ticket.every_gpu) {
    const auto usable = std::count_if(gpus.begin(), gpus.end(), [](const sched::GpuState& g) { return g.usable; });
    r.count = std::max<unsigned>(1, static_cast<unsigned>(usable));
  }
  return r;
}

std::vector<sched::Request> LineOf(const std::vector<TicketRecord>& tickets, const std::vector<sched::GpuState>& gpus) {
  std::vector<sched::Request> line;
  line.reserve(tickets.size());
  for (const auto& t : tickets) line.push_back(RequestOf(t, gpus));
  return line;
}

sched::Decision DecideNewcomer(const Occupancy& occupancy, const std::vector<TicketRecord>& tickets,
                               const sched::Request& request, const sched::Limits& limits,
                               const sched::LineShares* shares, double now_s) {
  TicketRecord newcomer;  // as CreateTicket would write it now: numbered after every live ticket
  newcomer.request = request;
  newcomer.seq = static_cast<std::uint64_t>(std::max(0.0, now_s) * 1e9);
  for (const auto& t : tickets) newcomer.seq = std::max(newcomer.seq, t.seq + 1);
  newcomer.seq = std::min(newcomer.seq, kMaxTicketSeq);
  newcomer.id = "\x7f";
  std::vector<sched::Request> line;
  std::size_t mine = 0;
  for (const auto& t : tickets) {
    if (LineBefore(t, newcomer, shares, now_s)) mine = line.size() + 1;
    line.push_back(RequestOf(t, occupancy.gpus));
  }
  line.insert(line.begin() + static_cast<std::ptrdiff_t>(mine), request);
  return sched::Schedule(occupancy.gpus, line, limits, occupancy.mig_units)[mine];
}

std::map<std::string, const TicketRecord*> HeldForLine(const Occupancy& occupancy, const std::vector<TicketRecord>& tickets,
                                                       const sched::Limits& limits) {
  std::map<std::string, const TicketRecord*> held;
  if (tickets.empty()) return held;
  const std::vector<sched::Request> line = LineOf(tickets, occupancy.gpus);
  const std::vector<sched::Decision> decisions = sched::Schedule(occupancy.gpus, line, limits, occupancy.mig_units);
  for (std::size_t t = 0; t < decisions.size() && t < tickets.size(); ++t)
    for (unsigned i : decisions[t].held)
      if (i < occupancy.gpus.size()) held.emplace(occupancy.gpus[i].uuid, &tickets[t]);
  return held;
}

Status CanEverQualify(const GpuSnapshot& snapshot, const sched::Request& request, const sched::Limits& limits,
                      ProcessTable& processes) {
  const Occupancy occupancy = BuildOccupancy(snapshot, {}, processes);
  const sched::Decision d = sched::Schedule(occupancy.gpus, {request}, limits, occupancy.mig_units).front();
  if (!d.impossible) return Status::Ok();
  return MakeError(ErrorKind::kInvalidArgument,
                   sched::ImpossibleReason(request, d, static_cast<unsigned>(snapshot.devices.size())));
}

ReadOptions DecisionReadOptions(const sched::Request& request) {
  ReadOptions options;
  options.sensors = false;
  options.utilization = true;
  options.topology = request.count > 1;
  return options;
}

}  // namespace gpulane::lease
