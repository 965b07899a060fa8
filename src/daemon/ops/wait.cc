// wait: a long-poll. The request names the jobs; the daemon parks it (Daemon::waiters_) and answers
// once every one of them has ended, with the jobs as a listing shows them.
#include <set>

#include "daemon/ops/ops.h"
#include "daemon/ops/resolve.h"
#include "store/job_id.h"

namespace gpulane::daemon::ops {

using nlohmann::json;

WaitPlan Wait(const Context& ctx, const proto::WaitRequest& req) {
  WaitPlan plan;
  auto refs = RefsOf(req.ids, "wait");
  if (!refs) {
    plan.answer = proto::ErrorResponse(refs.error().kind, refs.error().message);
    return plan;
  }
  Resolver resolve(ctx.store, ctx.jobs.active());
  Outcome out;
  std::set<std::int64_t> seen;
  for (const store::JobRef& ref : *refs) {
    auto named = resolve(ref);
    if (!named) {
      out.Failed(named.error().kind, store::FormatJobRef(ref), named.error().message);
      continue;
    }
    for (auto id : named->ids)
      if (seen.insert(id).second) plan.ids.push_back(id);
  }
  json checked = Ok();
  out.WithFailures(checked);
  plan.failed = checked["failed"];
  if (plan.ids.empty()) plan.answer = out.ErrorReply();
  else if (req.check) plan.answer = checked;  // only which ids name no job, at once (the CLI warns before it waits)
  return plan;
}

json WaitAnswer(const Context& ctx, const std::vector<std::int64_t>& ids, const json& failed) {
  // Any user may wait for any job: the jobs come as a listing shows them (no environment nor
  // notification target; another user's command line hidden unless daemon.show_commands).
  json jobs = json::array(), errors = json::array();
  for (auto id : ids) {
    auto job = ctx.jobs.Find(id);
    if (!job) continue;
    json j = store::JobToJson(*job, false);
    store::HideFields(j, {ctx.views.VisibilityFor(ctx.peer, *job).commands, true});
    jobs.push_back(std::move(j));
  }
  for (const auto& failure : failed) errors.push_back(failure["error"]);
  return Ok({{"jobs", jobs}, {"failed", failed}, {"errors", errors}});
}

}  // namespace gpulane::daemon::ops
