#pragma once
// What lease and ticket files hold. A lease says "this job holds these GPUs"; a ticket says "this
// request waits in line". Both are JSON files in the lease directory (lease/lease_dir.h).
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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
  std::string job_id;      ///< "r4121" for `gpulane run` (its pid), "12" for daemon jobs
  std::uint32_t uid = 0;   ///< owner of the lease file (stored too, as a check: a file that names another uid is no lease)
  std::string user;        ///< login name of `uid`
  pid_t pid = 0;           ///< the supervisor (`gpulane run` or the job's supervisor process), as written
  pid_t pgid = 0;          ///< the job's process group, 0 until the job starts
  pid_t holder = 0;        ///< the process holding the file's lock (/proc/locks; set when read, 0: unknown)
  std::uint64_t dev = 0, ino = 0;  ///< the file's identity (fstat; set when read)
  std::string command;     ///< the job's command line, for people
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
  std::uint64_t dev = 0, ino = 0;  ///< the file's identity (fstat; set when created or read): what a waiter knows its own ticket by
};

/// The largest seq a ticket may have (nanoseconds since the epoch: the year 2116). A ticket with a
/// larger one was not written by gpulane and is no ticket; a new ticket's seq never passes it.
inline constexpr std::uint64_t kMaxTicketSeq = 1ULL << 62;

/// True when `a` stands before `b` in line: higher priority first, then earlier seq, then id.
bool LineOrder(const TicketRecord& a, const TicketRecord& b);

nlohmann::json ToJson(const LeaseRecord& r);
nlohmann::json ToJson(const TicketRecord& r);
/// Parse; false when fields are missing or of the wrong type (a damaged or foreign file).
bool FromJson(const nlohmann::json& j, LeaseRecord* r);
bool FromJson(const nlohmann::json& j, TicketRecord* r);

/// "alice (job r4121)" for reasons and status.
std::string Describe(const LeaseRecord& r);

}  // namespace gpulane::lease
