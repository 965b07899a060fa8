#pragma once
// What lease and ticket files hold. A lease says "this job holds these GPUs"; a ticket says "this
// request waits in line". Both are JSON files in the lease directory (lease/lease_dir.h).
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sched/line_order.h"
#include "sched/request.h"

namespace gpulane::lease {

/// One GPU of a lease: exclusive (no mem_bytes) or shared with `mem_bytes` declared.
struct LeasedGpu {
  std::string uuid;
  std::optional<std::uint64_t> mem_bytes;
};

/// A live lease. `uid`, `holder` and the file's identity come from the kernel (the file's owner,
/// /proc/locks, fstat), never from its content (lease/lease_dir.h says how far content is trusted).
struct LeaseRecord {
  std::string job_id;      ///< "r4121" for `gpulane run` (its pid), "12" for daemon jobs (a number: GPULANE_JOB_ID)
  /// The job as people write it, for `status`, reasons and usage: "12_3" for task 3 of array 12
  /// (whose job_id is the task's own number, for task 0 the array's id, which means every task);
  /// "" = job_id (every lease but a queued array task's, and an older gpulane's). Read only when
  /// it is one id of the notation (kMaxLeaseJobTextBytes at most: "12" or "12_3"), else "" (the
  /// owner's word, as job_id is; JobText gives what to show).
  std::string job_text;
  std::uint32_t uid = 0;   ///< owner of the lease file (stored too, as a check: a file that names another uid is no lease)
  std::string user;        ///< login name of `uid`
  pid_t pid = 0;           ///< the supervisor (`gpulane run` or the job's supervisor process), as written
  pid_t pgid = 0;          ///< the job's process group, 0 until the job starts
  pid_t holder = 0;        ///< the process holding the file's lock (/proc/locks; set when read, 0: unknown)
  std::uint64_t dev = 0, ino = 0;  ///< the file's identity (fstat; set when read)
  /// A short name of the job for people (`status`, usage records): a queued job's name (public, as
  /// in `queue`), `gpulane run`'s program (argv[0]'s last part), never its arguments, directory or
  /// environment: the file is world-readable (docs/security.md, "Privacy").
  std::string label;
  std::vector<LeasedGpu> gpus;
  double started_s = 0;    ///< seconds since the epoch
  /// The job's --time-limit, seconds: it is stopped at started_s + time_limit_s (then its kill
  /// grace), so the policy may plan a reservation (backfill) against that end. nullopt: none. As
  /// written by the file's owner, who can only make her own lease look longer or shorter: a
  /// wrong end delays other jobs' backfill at worst, never hands out a leased GPU.
  std::optional<double> time_limit_s;
  std::string parent;      ///< nested: the file name of the lease of the job it runs inside ("" = none)
  /// When the job asked for GPUs (its ticket's time: a queued job's submission), seconds since the
  /// epoch, for its wait in accounting; nullopt: not known. As written by the owner (her own wait).
  std::optional<double> requested_s;
  /// A preemptible job's (submit --preemptible): a waiting job that needs its GPUs makes it give
  /// way (sched/policy.h). As written by the owner, who can only lose by it: a lease that says
  /// false when its job is preemptible is not preempted by others' decisions, but its own holder
  /// decides with its job's spec, not this field, and gives way all the same (lease/preemption.h).
  bool preemptible = false;
  std::string name;        ///< its file name in the lease directory (set when read, not stored)
  std::vector<std::string> other_names;  ///< more names of the same file (hard links someone made; set when read)
  /// Set when read from a live file (its lock held) that is no lease gpulane can read: why ("larger
  /// than 1 MiB", "not JSON", ...; UnreadableRecord). "" for a lease read whole. Such a file is not
  /// absent (unknown is not free): it holds, exclusively, the GPUs whose UUIDs its bytes name
  /// (`gpus`), or every GPU (`every_gpu`) when it names none, until its holder's lock is gone. Its
  /// job owns no process (no pid, no process group) and has no known end.
  std::string unreadable;
  bool every_gpu = false;  ///< unreadable and naming no GPU: holds every GPU and MIG device
};

/// Whether `name` is a name of the lease's file (LeaseRecord::name or one of its other names).
bool IsNamed(const LeaseRecord& r, const std::string& name);

/// A request waiting in line. The line is ordered by the request's priority (higher first), then
/// `seq` (LineOrder).
/// As read from the directory, priority and seq are what the file's owner may vouch for
/// (LeaseDir::Read, TrustTicket), which for other users than root is less than the content says.
struct TicketRecord {
  std::string id;          ///< file name stem; for people and file names only: two files may hold the same id
  std::uint64_t seq = 0;   ///< position key: nanoseconds since the epoch (the request's submission time)
  pid_t pid = 0;           ///< the process waiting (`gpulane run` or a queued job's supervisor)
  sched::Request request;  ///< what it asks; request.uid and .user come from the file's owner (root: from its content)
  std::string parent;      ///< nested: the file name of the lease of the job it runs inside ("" = none)
  /// The job that waits, as its lease will name it (JobText: "12", "12_3", "r4121"), for `status`'s
  /// "reserved for job 12 (alice)". As written by the owner; read only when IsTicketJobText, else ""
  /// (an older gpulane's ticket, or a damaged one: the job is not known).
  std::string job_text;
  /// Its lease's label to be (LeaseRecord::label: a queued job's name, a run's program), for
  /// `queue`'s list of waiting runs; as written by the owner, "" when over kMaxLeaseLabelBytes.
  std::string label;
  std::uint64_t dev = 0, ino = 0;  ///< the file's identity (fstat; set when created or read): what a waiter knows its own ticket by
  /// As LeaseRecord::unreadable: a live ticket gpulane cannot read stands in line (priority 0, at
  /// its file's change time) as its owner's exclusive request for the GPUs its bytes name, or for
  /// every GPU (`every_gpu`; LineOf makes the count) when it names none.
  std::string unreadable;
  bool every_gpu = false;
};

/// The largest seq a ticket may have (nanoseconds since the epoch: the year 2116). A ticket with a
/// larger one was not written by gpulane and is no ticket; a new ticket's seq never passes it.
inline constexpr std::uint64_t kMaxTicketSeq = 1ULL << 62;

/// A ticket's place in line (sched/line_order.h): its --priority, `line_priority` (fair share and
/// age, lease/line_shares.h; 0 without), its seq as the arrival, its id as the last tie-break.
/// The key points into `t`.
sched::LineKey TicketKey(const TicketRecord& t, double line_priority);

/// True when `a` stands before `b` in line without fair share: higher priority first, then
/// earlier seq, then id (sched::LineBefore over TicketKey(.., 0)).
bool LineOrder(const TicketRecord& a, const TicketRecord& b);

nlohmann::json ToJson(const LeaseRecord& r);
nlohmann::json ToJson(const TicketRecord& r);
/// Parse; false when fields are missing or of the wrong type (a damaged or foreign file).
bool FromJson(const nlohmann::json& j, LeaseRecord* r);
bool FromJson(const nlohmann::json& j, TicketRecord* r);

/// Whether the lease holds the GPU or MIG device `uuid` (an unreadable one naming none holds all).
bool HoldsGpu(const LeaseRecord& r, const std::string& uuid);

/// The most bytes a lease or ticket file is read to (1 MiB): a larger one is unreadable and, as
/// what it names past this bound is unknown, holds every GPU.
inline constexpr std::size_t kMaxRecordBytes = 1 << 20;
/// The most bytes of its label a lease keeps: longer ones are cut at a UTF-8 boundary and end in
/// "...", so that no name makes a lease too large to read.
inline constexpr std::size_t kMaxLeaseLabelBytes = 128;
/// The most bytes of a lease's job_text: a job id and an array index ("9223372036854775807_10000000").
inline constexpr std::size_t kMaxLeaseJobTextBytes = 28;
/// Whether `text` may be a lease's job_text: "12" or "12_3" (digits, at most one "_" between digits),
/// at most kMaxLeaseJobTextBytes.
bool IsLeaseJobText(std::string_view text);
/// Whether `text` may be a ticket's job_text: IsLeaseJobText, or a `gpulane run`'s "r" and digits
/// (a Python lease()'s "p" and digits).
bool IsTicketJobText(std::string_view text);
/// The lease's job as people name it: its job_text, else its job_id ("12_3", "12", "r4121").
const std::string& JobText(const LeaseRecord& r);
/// `label` cut to kMaxLeaseLabelBytes.
std::string LabelForLease(std::string label);
/// The label of a job run as `argv`: its program's last path part ("python" for /usr/bin/python3 is
/// "python3"), never its arguments.
std::string ProgramLabel(const std::vector<std::string>& argv);

/// The GPU and MIG device UUIDs ("GPU-...", "MIG-...") that the bytes of an unreadable record name,
/// each once, in order of first appearance.
std::vector<std::string> UuidsNamedIn(std::string_view bytes);

/// A lease for a live file that cannot be read as one (`why`; its owner and name are the reader's to fill),
/// holding what `bytes` (what could be read of it; empty when nothing) names, else every GPU.
/// `complete`: `bytes` is the whole file (else what it names past them is unknown: every GPU).
LeaseRecord UnreadableLease(std::string why, std::string_view bytes, bool complete);
/// The same for a ticket: its owner's exclusive request, priority 0, for what `bytes` names.
TicketRecord UnreadableTicket(std::string why, std::string_view bytes, bool complete);

/// "alice (job r4121)", "alice (job 12_3)" (JobText) for reasons and status.
std::string Describe(const LeaseRecord& r);
/// Who waits with `t`, for status: "job 12 (alice)"; "a request of alice" when its job is not
/// known; "an unreadable ticket of alice (why)".
std::string DescribeWaiter(const TicketRecord& t);

}  // namespace gpulane::lease
