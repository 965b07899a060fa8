#pragma once
// Joins what NVML shows with the live leases into the policy's view of each GPU (sched::GpuState):
// which processes belong to gpulane jobs on the GPUs those jobs leased and which are foreign, how
// much declared memory is not yet allocated, who holds a GPU exclusively. Also builds the line of
// waiting requests from the tickets. `pick`, `run`, queued jobs' supervisors and `status` all use
// this one join, so they agree on what is free.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gpu/backend.h"
#include "gpu/types.h"
#include "lease/records.h"
#include "os/process_table.h"
#include "sched/fairshare.h"
#include "sched/policy.h"
#include "util/result.h"

namespace gpulane::lease {

/// A process of a gpulane job on a GPU that job did not lease (a library that touches device 0
/// whatever CUDA_VISIBLE_DEVICES says; a host pid from another container that equals a job's
/// pid). It counts as foreign on that GPU.
struct StrayProcess {
  unsigned gpu = 0;          ///< PCI-order index of the GPU it runs on
  std::uint32_t pid = 0;
  std::string job_id;        ///< the job whose process tree it belongs to (its lease's job_id)
  std::string job_text;      ///< the same job as people name it ("12_3": JobText)
  std::string lease;         ///< that job's lease file (LeaseRecord::name)
  std::string user;          ///< that job's owner
};

/// A process on a GPU that no lease of that GPU owns (what GpuState::foreign words), or one whose
/// pid /proc does not show (another PID namespace) that is counted as a lease's of that GPU
/// without proof (GpuState::unverified). For the lease owner's watch on its GPUs (exec/leased_job).
struct OutsideProcess {
  unsigned gpu = 0;          ///< PCI-order index of the GPU it runs on
  std::uint32_t pid = 0;     ///< as NVML reports it
  std::string words;         ///< "bob's python (pid 12)", "pid 12 (not visible here)", ...
  bool visible = true;       ///< false: /proc does not show the pid
  std::string counted_as;    ///< not visible: the lease file (LeaseRecord::name) it is counted to; "" = foreign
};

/// The policy's view of the machine.
struct Occupancy {
  std::vector<sched::GpuState> gpus;  ///< one per device of the snapshot, same order
  std::vector<StrayProcess> strays;
  std::vector<OutsideProcess> outside;  ///< whole GPUs' processes no lease owns or only unverified, in order
  /// The MIG devices of the GPUs in MIG mode, GPU by GPU in PCI order, each in NVML's slot order.
  std::vector<sched::MigUnit> mig_units;
};

/// How BuildOccupancy treats what the lease directory cannot tell.
struct OccupancyOptions {
  /// Nested decisions: the lease of the job the request runs inside. It owns its processes (they
  /// are the job's own, not foreign) but holds no GPU against the request.
  const LeaseRecord* transparent = nullptr;
  /// Pids this caller saw alive in an earlier snapshot and that are gone now: NVML still listing
  /// one (the driver lags a process's exit) means memory about to be freed, not a process of
  /// another PID namespace.
  const std::set<std::uint32_t>* ended_pids = nullptr;
};

/// Builds the occupancy of `snapshot` (processes annotated from /proc, AnnotateProcesses) under
/// `leases`. A process NVML lists whose pid no longer exists is ignored and its memory counted as
/// free (NVML may lag a process's exit). One /proc never showed runs in another PID namespace
/// (inside a container NVML reports the host's pids, the job's own included): on a GPU whose
/// leases show no visible process of their jobs it is counted, unverified, as the first such
/// lease's whose declaration it fits (a whole-GPU lease takes any) and said so in
/// GpuState::unverified; otherwise it is foreign. A process belongs to a lease only when it is its owner's (the process's real uid is
/// the lease file's owner), the lease holds this GPU, and the lease's supervisor is among its
/// ancestors or the process is in the job's process group; any other process is foreign. The
/// supervisor counts only as far as the kernel confirms it: the "pid" the file names must be the
/// process holding the file's lock (LeaseRecord::holder) or a descendant of it, else the lease owns
/// its job's process group alone. A shared lease reserves max(0, declared - used by its processes)
/// on top of what NVML shows as used. Unreported memory or process lists stay unknown (nullopt /
/// false), never empty or zero. A leased GPU's busy_until_s is the latest end (started_s +
/// time_limit_s) of its leases when every one has a time limit; else unknown (nullopt).
/// A process belongs to the lease whose holder is its closest ancestor (or whose process group it
/// is in), so a job nested in another one owns its own processes.
Occupancy BuildOccupancy(const GpuSnapshot& snapshot, const std::vector<LeaseRecord>& leases, ProcessTable& processes,
                         const OccupancyOptions& options = {});

/// Which lease accounts for each GPU process, by BuildOccupancy's rule (the lease owner's process,
/// descending from the lease's confirmed supervisor or in its job's process group, on a GPU or MIG
/// device that lease holds): owners[d][k] is the index in `leases` of the lease of
/// snapshot.devices[d].processes[k], or -1 for a process no lease accounts for (foreign, a stray
/// of a job on a GPU it did not lease, or not visible here), or kEndedProcess for one /proc showed
/// when the snapshot was annotated and no longer does (it ended; NVML lags). A device whose
/// processes are unknown gets an empty list. For the daemon's per-job accounting and anomalies.
inline constexpr int kEndedProcess = -2;
std::vector<std::vector<int>> ProcessOwners(const GpuSnapshot& snapshot, const std::vector<LeaseRecord>& leases,
                                            ProcessTable& processes);

/// The process a lease's job descends from, as far as the kernel vouches for it: the "pid" its
/// file names when that is the process holding its lock or below it, or the parent of a holder
/// running `gpulane _lease` when that parent is the lease owner's; 0 when neither.
std::uint32_t AnchorOf(const LeaseRecord& lease, ProcessTable& table);

/// The lease of the gpulane job this process runs inside, if any: the live lease whose job id is
/// `job_id` (the GPULANE_JOB_ID this process inherited), whose owner is `self_pid`'s user and
/// whose supervisor (as confirmed by its lock, BuildOccupancy) is an ancestor of `self_pid` (so
/// neither an environment variable nor a "pid" written in a file can claim another job's lease).
const LeaseRecord* FindParentLease(const std::vector<LeaseRecord>& leases, const std::optional<std::string>& job_id,
                                   std::uint32_t self_pid, ProcessTable& processes);

/// The tickets that share a line with a request nested in the lease named `parent` ("": the
/// machine's line of requests not nested in any job).
std::vector<TicketRecord> TicketsOfLine(const std::vector<TicketRecord>& tickets, const std::string& parent);

/// What decides a request: the occupancy and the line it stands in. For a request nested in a job
/// (`parent_name`: that job's lease file), only that job's GPUs count, its lease holds nothing
/// against the request, and the line is the requests nested in the same job.
struct LineView {
  Occupancy occupancy;
  std::vector<TicketRecord> tickets;   ///< the line, first in line first
  const LeaseRecord* parent = nullptr; ///< nested: the parent job's lease (points into the contents)
};

/// The view for a request in `parent_name`'s line ("" = the machine's line). Errors: kNotFound
/// when `parent_name` is set but that lease is gone (the job it ran inside has ended).
Result<LineView> ViewOfLine(const std::vector<LeaseRecord>& leases, const std::vector<TicketRecord>& tickets,
                            const GpuSnapshot& snapshot, ProcessTable& processes, const std::string& parent_name,
                            const std::set<std::uint32_t>* ended_pids = nullptr);

/// `allowed` (UUIDs) narrowed to the GPUs of `parent`'s lease when nested (unchanged otherwise).
std::vector<std::string> WithinParent(std::vector<std::string> allowed, const LeaseRecord* parent);

/// What `ticket` asks of `gpus`: its request, or for an unreadable ticket that names no GPU
/// (TicketRecord::every_gpu) every usable GPU, exclusively.
sched::Request RequestOf(const TicketRecord& ticket, const std::vector<sched::GpuState>& gpus);
/// The requests of `tickets` (already in line order, LeaseDir::Read) for sched::Schedule over `gpus`.
std::vector<sched::Request> LineOf(const std::vector<TicketRecord>& tickets, const std::vector<sched::GpuState>& gpus);

/// The decision `request` would get if it joined the line now (`now_s`, seconds since the epoch):
/// behind every ticket that LineBefore (lease/line_shares.h) puts before a new ticket of its
/// priority and user under `shares` (nullptr: none published), which is what `gpulane pick` asks;
/// `run` gets the same from its own ticket at that place.
sched::Decision DecideNewcomer(const Occupancy& occupancy, const std::vector<TicketRecord>& tickets,
                               const sched::Request& request, const sched::Limits& limits,
                               const sched::LineShares* shares, double now_s);

/// The GPUs the line holds for its waiting tickets (Decision::held) as DecideNewcomer decides
/// them for `pick` and `run` over the same line and limits: GPU UUID -> the ticket it is held for
/// (the earliest in line). A newcomer gets such a GPU only by backfill. For `status`.
std::map<std::string, const TicketRecord*> HeldForLine(const Occupancy& occupancy, const std::vector<TicketRecord>& tickets,
                                                       const sched::Limits& limits);

/// Whether `request` could ever be met on the GPUs of `snapshot` (nothing leased, nothing waiting):
/// the policy's own "never" rules, as `run` applies them on its first look. Errors:
/// kInvalidArgument with sched::ImpossibleReason. `processes`: the caller's process table (os::Env's).
Status CanEverQualify(const GpuSnapshot& snapshot, const sched::Request& request, const sched::Limits& limits,
                      ProcessTable& processes);

/// What NVML must be read for to decide `request`: the same for pick, run and supervisors, so
/// they rank GPUs alike (memory and processes always; utilisation, which breaks ties; NVLink for
/// multi-GPU requests; no sensors).
ReadOptions DecisionReadOptions(const sched::Request& request);

/// "alice's python (pid 12)", or "pid 12 (not visible here)" for a pid /proc does not show.
std::string DescribeProcess(const GpuProcess& process);

}  // namespace gpulane::lease
