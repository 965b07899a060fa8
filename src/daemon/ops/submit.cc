// submit: a submission checked with `run`'s rules (GPUs resolved, impossible requests refused,
// priority above 0 for admins only, the user's [limits]) and made into jobs. Storing them (the group
// commit, arrays in parts) is the job table's: JobTable::Submit, job_table_submit.cc.
#include <fmt/format.h>

#include "daemon/ops/ops.h"
#include "daemon/ops/resolve.h"
#include "exec/job_env.h"
#include "gpu/visible_devices.h"
#include "lease/occupancy.h"
#include "sched/user_limits.h"

namespace gpulane::daemon::ops {
namespace {

using store::Job;
using store::JobState;

// The request's GPUs and limits: the user's time limits applied, their GPU limit, the priority only
// an admin may raise, and (unless CPU-only) the GPUs it may use, resolved and possible at all.
Status CheckGpus(const Context& ctx, const LimitsConfig& user_limits, const GpuSnapshot& gpus, Job& job) {
  sched::Request& request = job.spec.request;
  const Peer& peer = ctx.peer;
  if (Status s = sched::ApplyTimeLimits(user_limits, peer.user, request); !s.ok()) return s;
  if (Status s = sched::CheckGpuLimitEver(user_limits, peer.user, request.count); !s.ok()) return s;
  if (request.priority > 0 && !peer.admin)
    return MakeError(ErrorKind::kPermission,
                     fmt::format("--priority {}: only root and members of daemon.admin_group may raise a job's priority "
                                 "above 0; give 0 or a negative number",
                                 request.priority));
  if (request.count == 0) return Status::Ok();  // a CPU-only job (-g 0) chooses no GPU
  auto allowed = ResolveAllowedGpus(
      request.gpu_list, InheritedGpusFrom([&](const char* name) { return exec::EnvValue(job.spec.env, name); }), gpus);
  if (!allowed) return allowed.error();
  request.allowed_uuids = std::move(allowed).value();
  return lease::CanEverQualify(gpus, request, sched::Limits{ctx.config.memory_margin_bytes}, ctx.processes);
}

// Every dependency must name a job: a look-up or two each (at most kMaxDependencies of them),
// never reading an array's tasks or a job's spec. Only a failure is worded by the Resolver.
Status CheckDependencies(const Context& ctx, const store::JobSpec& spec) {
  for (auto [option, deps] : {std::pair{"--after", &spec.after_ok}, std::pair{"--after-any", &spec.after_any}})
    for (const store::JobRef& dep : *deps) {
      bool found = dep.task ? ctx.jobs.TaskState(dep).has_value() : ctx.jobs.active().count(dep.id) > 0;
      if (!found && !dep.task) {
        auto head = ctx.store.Head(dep.id);
        found = head && *head;
      }
      if (found) continue;
      Resolver resolve(ctx.store, ctx.jobs.active());
      auto named = resolve(dep);
      return MakeError(named ? ErrorKind::kNotFound : named.error().kind,
                       fmt::format("{} {}: {}", option, dep, named ? "no such job" : named.error().message));
    }
  return Status::Ok();
}

// The tasks of an array (and each one's command, from a command file), within the user's
// limits.max_queued; counted in `unfinished`.
Status AddArray(const proto::SubmitRequest& req, const LimitsConfig& user_limits, const std::string& user,
                std::size_t& unfinished, Submission& sub) {
  auto indices = store::ArrayIndicesFromJson(*req.array);  // found by fuzz_request: a float index was UB
  if (!indices) return indices.error();
  if (Status s = sched::CheckQueuedLimit(user_limits, user, unfinished, indices->size()); !s.ok()) return s;
  if (req.array_argv) {  // submit --array-file: a command of its own for each task
    auto commands = store::ArrayArgvFromJson(*req.array_argv, indices->size());
    if (!commands) return commands.error();
    sub.task_argv = std::move(commands).value();
  }
  unfinished += indices->size();
  sub.indices = std::move(indices).value();  // the tasks are made part by part (JobTable::StoreArrayPart)
  sub.array = true;
  return Status::Ok();
}

}  // namespace

Result<Submission> CheckSubmission(const Context& ctx, SubmitQuotas& quotas, const GpuSnapshot& gpus,
                                   const proto::SubmitRequest& req) {
  const Peer& peer = ctx.peer;
  Submission sub;
  if (req.idempotency_key) sub.key = *req.idempotency_key;
  Job job;
  if (Status s = store::SpecFromJson(*req.spec, &job.spec, store::SpecLimits::kSubmitted); !s.ok())
    return MakeError(s.error().kind, "submit: " + s.error().message);
  // A client that sends no kill grace (gpulane submit always sends its user's) gets the machine's.
  if (!req.spec->contains("kill_grace_s")) job.spec.kill_grace_s = ctx.config.kill_grace_s;
  // Who asks is the kernel's word (SO_PEERCRED), never the request's: the job's one owner (Job::uid).
  sched::Request& request = job.spec.request;
  request.uid = peer.uid;
  request.user = peer.user;
  request.submit_time_s = ctx.clock.WallS();
  const LimitsConfig& user_limits = quotas.LimitsOfUid(peer.uid, peer.user);
  if (Status s = CheckGpus(ctx, user_limits, gpus, job); !s.ok()) return s.error();
  if (job.spec.cwd.empty() || job.spec.cwd.front() != '/')
    return MakeError(ErrorKind::kInvalidArgument, "submit: the working directory must be an absolute path");
  if (Status s = CheckDependencies(ctx, job.spec); !s.ok()) return s.error();
  job.gid = peer.gid;
  job.state = req.hold ? JobState::kHeld : JobState::kPending;
  // Counted (a walk over every unfinished job, once a turn) only for a user with limits.max_queued.
  std::size_t uncounted = 0;
  std::size_t& unfinished = user_limits.max_queued ? quotas.UnfinishedOf(peer.uid) : uncounted;
  if (req.array) {
    if (Status s = AddArray(req, user_limits, peer.user, unfinished, sub); !s.ok()) return s.error();
  } else {
    if (Status s = sched::CheckQueuedLimit(user_limits, peer.user, unfinished, 1); !s.ok()) return s.error();
    ++unfinished;
  }
  sub.jobs.push_back(std::move(job));
  return sub;
}

}  // namespace gpulane::daemon::ops
