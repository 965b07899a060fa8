// cancel, hold, release: the requests that change jobs' states. The handlers choose the jobs (and
// the failures' lines); the daemon changes them in parts, one transaction each, and answers once the
// last part is stored (daemon/jobs_in_parts.h, cancel_slices.cc, hold_slices.cc). They change no
// job: the job table does, part by part (JobTable::BeginParts keeps a chosen pending job from
// launching until its part is done).
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "daemon/ops/ops.h"
#include "daemon/ops/resolve.h"
#include "render/queue_table.h"
#include "store/job_id.h"

namespace gpulane::daemon::ops {
namespace {

using store::Job;
using store::JobState;

// Why hold (`hold`) or release cannot change the unfinished `job`; `hold_requested`: it is leaving
// the line for GPUs to be held.
std::string NotApplicable(const Job& job, bool hold, bool hold_requested) {
  const std::string id = store::JobIdText(job);
  if (!hold && hold_requested)
    return fmt::format("job {} is not held yet (it is leaving the line for GPUs): release it once it is held", id);
  if (!hold) return fmt::format("job {} is {}, not held", id, StateLabel(job.state));
  if (job.state == JobState::kRunning)
    return fmt::format("job {} is running: hold keeps queued jobs from starting (gpulane cancel {} ends it)", id, id);
  return fmt::format("job {} is held already", id);
}

// Why hold or release changes none of array `named`'s unfinished tasks `live`: every task held
// already is said as a single job's is ("is held already", with the same exit code).
std::string NoneOfArray(const Named& named, const std::vector<const Job*>& live, bool hold) {
  const bool all_held = std::all_of(live.begin(), live.end(), [](const Job* job) { return job->state == JobState::kHeld; });
  if (hold && all_held)
    return fmt::format("array {} is held already ({} {} held)", named.text, live.size(), live.size() == 1 ? "task" : "tasks");
  return fmt::format("array {} has no {} tasks to {}", named.text, hold ? "pending" : "held", hold ? "hold" : "release");
}

// --user and --name: the unfinished jobs that match (--name alone: the caller's own, every user's
// for an admin), each handed to `cancel`.
template <typename Cancel>
void CancelMatching(const Context& ctx, const proto::CancelRequest& req, Outcome& out, Cancel cancel) {
  const Peer& peer = ctx.peer;
  const std::string &user = req.user, &name = req.name;
  std::string filter = user.empty() ? "" : "--user " + user;
  if (!name.empty()) filter += (filter.empty() ? "--name " : " --name ") + name;
  if (!user.empty() && user != peer.user && !peer.admin) {
    ctx.views.Log(fmt::format("refused: {} (uid {}) may not cancel the jobs of {}", peer.user, peer.uid, user));
    out.Failed(ErrorKind::kPermission, filter, fmt::format("--user {}: only {} or an admin may cancel their jobs", user, user));
    return;
  }
  std::size_t matched = 0;
  auto match = [&](const Job& job) {
    if (store::IsFinished(job.state) || (!user.empty() && job.user() != user) || (!name.empty() && job.spec.name != name))
      return;
    ++matched;
    cancel(job);
  };
  // One user's own jobs through their index (IdsOfUid), not a walk of everyone's.
  if (user.empty() && !peer.admin) {
    for (std::int64_t id : ctx.jobs.IdsOfUid(peer.uid))
      if (auto it = ctx.jobs.active().find(id); it != ctx.jobs.active().end()) match(it->second);
  } else {
    for (const auto& [id, job] : ctx.jobs.active()) match(job);
  }
  if (!matched) out.Failed(ErrorKind::kNotFound, filter, fmt::format("no queued or running job matches {}", filter));
}

// Each of `refs` resolved, checked (the peer may act on it) and its unfinished jobs handed to
// `each(named, live)`; a failure's line goes to `out` (and a refusal to the log) instead.
template <typename Each>
void ForEachLiveNamed(const Context& ctx, const std::vector<store::JobRef>& refs, Resolver& resolve,
                      const std::string& op, Outcome& out, Each each) {
  for (const store::JobRef& ref : refs) {
    auto named = resolve(ref);
    if (!named) {
      out.Failed(named.error().kind, store::FormatJobRef(ref), named.error().message);
      continue;
    }
    if (auto refused = Refuse(ctx.peer, *named, resolve, op, out)) {
      ctx.views.Log(*refused);
      continue;
    }
    std::vector<const Job*> live = Live(ctx.jobs.active(), *named);
    if (live.empty()) {
      out.Failed(ErrorKind::kWrongState, named->text, Ended(*named, resolve));
      continue;
    }
    each(*named, live);
  }
}

}  // namespace

Result<Chosen> Cancel(const Context& ctx, const proto::CancelRequest& req) {
  auto refs = RefsOf(req.ids, "cancel");
  if (!refs) return refs.error();
  Resolver resolve(ctx.store, ctx.jobs.active());
  Chosen plan;
  std::set<std::int64_t> seen;
  auto cancel = [&](const Job& job) {
    if (!seen.insert(job.id).second) return;
    plan.ids.push_back(job.id);
  };
  ForEachLiveNamed(ctx, *refs, resolve, "cancel", plan.out, [&](const Named&, const std::vector<const Job*>& live) {
    for (const Job* job : live) cancel(*job);
  });
  if (!req.user.empty() || !req.name.empty()) CancelMatching(ctx, req, plan.out, cancel);
  return plan;
}

Result<Chosen> Hold(const Context& ctx, const std::vector<nlohmann::json>& ids, bool hold) {
  const std::string op = hold ? "hold" : "release";
  auto refs = RefsOf(ids, op);
  if (!refs) return refs.error();
  Resolver resolve(ctx.store, ctx.jobs.active());
  Chosen chosen;
  std::set<std::int64_t> seen;
  // Whether `job` is one `op` changes: hold takes pending jobs and those waiting for GPUs, release held ones.
  auto applies = [&](const Job& job) {
    if (!hold) return job.state == JobState::kHeld;
    return job.state == JobState::kPending || (job.state == JobState::kLaunching && !ctx.jobs.HoldRequested(job.id));
  };
  auto choose = [&](const Job& job) {
    if (!seen.insert(job.id).second) return;
    chosen.ids.push_back(job.id);
  };
  ForEachLiveNamed(ctx, *refs, resolve, op, chosen.out, [&](const Named& named, const std::vector<const Job*>& live) {
    std::vector<const Job*> changing;
    for (const Job* job : live)
      if (applies(*job)) changing.push_back(job);
    if (changing.empty()) {
      chosen.out.Failed(ErrorKind::kWrongState, named.text,
                        named.array ? NoneOfArray(named, live, hold) : NotApplicable(*live.front(), hold, ctx.jobs.HoldRequested(live.front()->id)));
      return;
    }
    for (const Job* job : changing) choose(*job);
  });
  return chosen;
}

}  // namespace gpulane::daemon::ops
