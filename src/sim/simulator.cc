#include "sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <queue>

#include "sched/launch.h"
#include "sched/line_order.h"
#include "util/strings.h"

namespace gpulane::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// One simulated GPU: the jobs on it.
struct Gpu {
  std::vector<std::size_t> jobs;  // running here
  bool exclusive = false;
  std::uint64_t declared = 0;     // memory declared by the shared jobs on it
  double free_since = 0;
};

// The users' fair-share factors as the daemon keeps them (sched/fairshare.h): each user's ended
// use as one decayed number, the running jobs' use so far, the users that count (used something
// or wait).
class FairShare {
 public:
  FairShare(const std::vector<Job>& jobs, const std::vector<Outcome>& out, const SimOptions& o, std::size_t users)
      : jobs_(jobs), out_(out), o_(o), ended_gpu_s_(users, 0), ended_at_s_(users, 0), share_(users, 1.0), usage_(users),
        factor_(users), waiting_(users, 0) {
    for (std::size_t u = 0; u < users && u < o.user_names.size(); ++u)
      share_[u] = sched::ShareOf(o.user_names[u], {}, o.fair_share_settings.shares);
  }
  void Arrived(std::size_t j) { ++waiting_[jobs_[j].user]; }
  void Started(std::size_t j) {
    --waiting_[jobs_[j].user];
    running_.push_back(j);
  }
  void Ended(std::size_t j, double now) {
    const unsigned u = jobs_[j].user;
    const double half_life_s = o_.fair_share_settings.half_life_s;
    ended_gpu_s_[u] = sched::DecayTo(ended_gpu_s_[u], ended_at_s_[u], now, half_life_s) +
                      sched::DecayedUsageGpuS({"", out_[j].start_s, out_[j].end_s, GpuShare(jobs_[j], o_.gpu_mem_bytes)}, now,
                                              half_life_s);
    ended_at_s_[u] = now;
    running_.erase(std::find(running_.begin(), running_.end(), j));
  }
  // Every user's factor at `now`.
  void Update(double now) {
    const double half_life_s = o_.fair_share_settings.half_life_s;
    double total_usage = 0, total_share = 0;
    for (std::size_t u = 0; u < usage_.size(); ++u) usage_[u] = sched::DecayTo(ended_gpu_s_[u], ended_at_s_[u], now, half_life_s);
    for (std::size_t j : running_)
      usage_[jobs_[j].user] +=
          sched::DecayedUsageGpuS({"", out_[j].start_s, std::nullopt, GpuShare(jobs_[j], o_.gpu_mem_bytes)}, now, half_life_s);
    for (std::size_t u = 0; u < usage_.size(); ++u) {
      total_usage += usage_[u];
      if (usage_[u] > 0 || waiting_[u] > 0) total_share += share_[u];
    }
    for (std::size_t u = 0; u < usage_.size(); ++u)
      factor_[u] = sched::FairShareFactor(total_usage > 0 ? usage_[u] / total_usage : 0, total_share > 0 ? share_[u] / total_share : 0);
  }
  // Job j's priority at `now` (sched::PriorityOf), from the factors of the last Update.
  double PriorityOf(std::size_t j, double now) const {
    return sched::PriorityOf(factor_[jobs_[j].user], now - jobs_[j].submit_s, o_.fair_share_settings).value;
  }

 private:
  const std::vector<Job>& jobs_;
  const std::vector<Outcome>& out_;
  const SimOptions& o_;
  std::vector<double> ended_gpu_s_, ended_at_s_, share_, usage_, factor_;
  std::vector<std::size_t> waiting_;  // each user's jobs queued or launched
  std::vector<std::size_t> running_;
};

}  // namespace

const char* PlacementName(Placement placement) { return placement == Placement::kMostFree ? "mostfree" : "bestfit"; }

std::optional<Placement> ParsePlacement(const std::string& name) {
  for (Placement p : {Placement::kBestFit, Placement::kMostFree})
    if (name == PlacementName(p)) return p;
  return std::nullopt;
}

Result<std::vector<Outcome>> Simulate(const std::vector<Job>& jobs, const SimOptions& o, SimStats* stats) {
  std::vector<Outcome> out(jobs.size());
  for (const Job& j : jobs)
    if (j.gpus > o.gpus || j.gpus == 0 || j.mem_bytes > o.gpu_mem_bytes)
      return MakeError(ErrorKind::kInvalidArgument, StrCat("job ", j.id, " can never start on ", o.gpus, " GPUs"));
  std::vector<Gpu> gpus(o.gpus);
  std::vector<std::vector<unsigned>> placed(jobs.size());  // GPUs of each running job
  using End = std::pair<double, std::size_t>;
  std::priority_queue<End, std::vector<End>, std::greater<End>> ends;
  sched::Limits limits;
  limits.policy = o.policy;
  limits.max_reserve_idle_s = o.max_reserve_idle_s;
  limits.grants_only = true;
  std::vector<sched::GpuState> state(o.gpus);
  for (unsigned i = 0; i < o.gpus; ++i) {
    state[i].index = i;
    state[i].total_bytes = o.gpu_mem_bytes;
    state[i].free_bytes = o.gpu_mem_bytes;
    state[i].util_pct = 0;
  }
  auto refresh = [&](unsigned i) {  // state[i] from gpus[i]
    const Gpu& g = gpus[i];
    sched::GpuState& s = state[i];
    s.has_context = !g.jobs.empty();
    s.exclusive_holder.reset();
    if (g.exclusive) s.exclusive_holder = "a job";
    s.shared_leases = g.exclusive ? 0 : static_cast<unsigned>(g.jobs.size());
    s.unallocated_reservation_bytes = g.declared;
    s.busy_until_s.reset();
    s.free_since_s.reset();
    if (g.jobs.empty()) {
      s.free_since_s = g.free_since;
      return;
    }
    double until = 0;
    for (std::size_t j : g.jobs) {
      if (!jobs[j].time_limit_s) return;  // an end nobody knows
      until = std::max(until, out[j].start_s + *jobs[j].time_limit_s);
    }
    s.busy_until_s = until;
  };
  for (unsigned i = 0; i < o.gpus; ++i) refresh(i);

  // The daemon's two lines. The queue: the jobs not yet handed to a supervisor, per user in
  // submission order; the daemon's own sched::PlanLaunches decides which of them join the lease
  // line (at most max_waiting wait there at once), in the one line order (sched/line_order.h):
  // with fair share (kDefault) each user's factor (sched::FairShareFactor over the users that used
  // something or wait) and the job's age, else submission order. The lease line: the launched
  // jobs, in the same order, which sched::Schedule decides.
  const bool fair = o.fair_share && o.policy == sched::PolicyKind::kDefault;
  const unsigned max_waiting = o.max_waiting ? o.max_waiting : sched::DefaultMaxWaiting(o.gpus);
  std::size_t user_count = 0;
  for (const Job& j : jobs) user_count = std::max<std::size_t>(user_count, j.user + 1);
  std::vector<std::deque<std::size_t>> waiting_of(user_count);  // queued, in submission order
  FairShare shares(jobs, out, o, user_count);
  std::vector<std::size_t> launched;
  std::vector<char> in_lease_line(jobs.size(), 0);
  std::size_t waiting = 0;  // queued and launched
  auto request_of = [&](const Job& j) {
    sched::Request r;
    r.count = j.gpus;
    if (j.mem_bytes) r.mem_bytes = j.mem_bytes;
    r.submit_time_s = j.submit_s;
    r.time_limit_s = j.time_limit_s;
    if (o.placement == Placement::kMostFree) r.order = sched::Order::kMostFree;
    return r;
  };
  auto key_of = [&](std::size_t j, double now) {
    return sched::LineKey{0, fair ? shares.PriorityOf(j, now) : 0, static_cast<std::uint64_t>(j), {}};
  };
  // The head of the queue (as many as PlanLaunches looks at: sched::LaunchLookahead), as a k-way
  // merge of the users' queues, each in line order already: PlanLaunches on this head decides
  // exactly as on the whole queue, without building it at every event.
  using Head = std::pair<sched::LineKey, std::size_t>;  // (key, user)
  auto after = [](const Head& x, const Head& y) { return sched::LineBefore(y.first, x.first); };
  std::vector<std::size_t> pos(user_count, 0);
  std::vector<sched::QueuedJob> queue_head;
  auto head_of_queue = [&](double now) {
    std::priority_queue<Head, std::vector<Head>, decltype(after)> heads(after);
    std::fill(pos.begin(), pos.end(), 0);
    for (std::size_t u = 0; u < user_count; ++u)
      if (!waiting_of[u].empty()) heads.push({key_of(waiting_of[u][0], now), u});
    queue_head.clear();
    while (queue_head.size() < sched::LaunchLookahead(max_waiting) && !heads.empty()) {
      const auto [key, u] = heads.top();
      heads.pop();
      sched::QueuedJob q;
      q.id = static_cast<std::int64_t>(waiting_of[u][pos[u]++]);
      q.fair_priority = key.line_priority;
      queue_head.push_back(q);
      if (pos[u] < waiting_of[u].size()) heads.push({key_of(waiting_of[u][pos[u]], now), u});
    }
  };
  std::vector<sched::Request> line;
  // Fragmentation: whole-GPU jobs waiting, by GPUs wanted.
  std::vector<std::size_t> whole_waiting(o.gpus + 1, 0);
  // Starts job j on `on` at `now`.
  auto start = [&](std::size_t j, const std::vector<unsigned>& on, double now) {
    if (fair) shares.Started(j);
    const Job& job = jobs[j];
    --waiting;
    if (!job.mem_bytes) --whole_waiting[job.gpus];
    Outcome& result = out[j];
    result.start_s = now;
    const bool stopped = job.time_limit_s && *job.time_limit_s < job.duration_s;
    result.timed_out = stopped;
    result.end_s = now + (stopped ? *job.time_limit_s : job.duration_s);
    placed[j] = on;
    for (unsigned i : on) {
      Gpu& g = gpus[i];
      g.jobs.push_back(j);
      if (job.mem_bytes) g.declared += job.mem_bytes;
      else g.exclusive = true;
      refresh(i);
    }
    ends.emplace(result.end_s, j);
  };

  std::size_t next = 0;  // next arrival
  double recheck = kInf;
  SimStats counts;
  // Fragmentation: time integrals of the GPU counts.
  double first_s = jobs.empty() ? 0 : jobs.front().submit_s, last_s = first_s;
  double shared_integral = 0, idle_integral = 0;
  // Adds the state of the GPUs (unchanged since the previous event) over [last_s, now).
  auto integrate = [&](double now) {
    const double dt = now - last_s;
    last_s = now;
    if (!(dt > 0)) return;
    unsigned shared = 0, idle = 0, exclusive = 0;
    std::uint64_t declared = 0;
    for (const Gpu& g : gpus) {
      if (g.jobs.empty()) ++idle;
      else if (g.exclusive) ++exclusive;
      else ++shared;
      declared += g.declared;
    }
    shared_integral += shared * dt;
    idle_integral += idle * dt;
    unsigned smallest = 0;  // fewest GPUs a waiting whole-GPU job wants
    for (unsigned k = 1; k <= o.gpus && smallest == 0; ++k)
      if (whole_waiting[k] > 0) smallest = k;
    if (smallest == 0 || idle >= smallest) return;
    const std::uint64_t packed = (declared + o.gpu_mem_bytes - 1) / o.gpu_mem_bytes;  // GPUs the shares need at least
    if (o.gpus - exclusive >= packed + smallest) counts.fragmented_s += dt;
  };
  while (next < jobs.size() || !ends.empty() || waiting > 0) {
    double now = kInf;
    if (next < jobs.size()) now = jobs[next].submit_s;
    if (!ends.empty()) now = std::min(now, ends.top().first);
    if (waiting > 0) now = std::min(now, recheck);
    if (!std::isfinite(now))
      return MakeError(ErrorKind::kInternal, StrCat(waiting, " jobs wait with nothing running and nothing to come (policy ",
                                                    sched::PolicyName(o.policy), ")"));
    integrate(now);
    while (!ends.empty() && ends.top().first <= now) {
      const std::size_t j = ends.top().second;
      ends.pop();
      if (fair) shares.Ended(j, now);
      for (unsigned i : placed[j]) {
        Gpu& g = gpus[i];
        g.jobs.erase(std::find(g.jobs.begin(), g.jobs.end(), j));
        g.declared -= jobs[j].mem_bytes;
        if (g.jobs.empty()) {
          g.exclusive = false;
          g.free_since = now;
        }
        refresh(i);
      }
    }
    while (next < jobs.size() && jobs[next].submit_s <= now) {
      if (!jobs[next].mem_bytes) ++whole_waiting[jobs[next].gpus];
      waiting_of[jobs[next].user].push_back(next);
      if (fair) shares.Arrived(next);
      ++waiting;
      ++next;
    }
    counts.max_waiting = std::max(counts.max_waiting, waiting);
    if (waiting == 0) continue;
    limits.now_s = now;
    recheck = kInf;
    // As in the daemon, a grant is an event (its job starts), after which PlanLaunches fills the
    // lease line again: decide at this instant until nothing more starts or nothing is queued.
    for (bool again = true; again;) {
      if (fair) shares.Update(now);
      if (waiting > launched.size()) {
        head_of_queue(now);
        sched::LaunchLimits launch_limits;
        launch_limits.max_waiting = max_waiting;
        launch_limits.already_waiting = static_cast<unsigned>(launched.size());
        const sched::LaunchPlan plan = sched::PlanLaunches(
            queue_head, [](const sched::JobRef&) { return sched::DependencyState::kCompleted; }, launch_limits);
        for (std::int64_t id : plan.launch) {
          launched.push_back(static_cast<std::size_t>(id));
          in_lease_line[static_cast<std::size_t>(id)] = 1;
        }
        // A user's jobs are in line order in submission order (the older, the higher its age), so
        // those launched are the fronts of their users' queues.
        for (std::int64_t id : plan.launch)
          for (auto& mine = waiting_of[jobs[static_cast<std::size_t>(id)].user]; !mine.empty() && in_lease_line[mine.front()];)
            mine.pop_front();
      }
      if (launched.empty()) break;
      std::sort(launched.begin(), launched.end(),
                [&](std::size_t x, std::size_t y) { return sched::LineBefore(key_of(x, now), key_of(y, now)); });
      line.clear();
      for (std::size_t j : launched) line.push_back(request_of(jobs[j]));
      ++counts.decisions;
      const std::vector<sched::Decision> decisions = sched::Schedule(state, line, limits);
      recheck = kInf;
      std::vector<std::size_t> still;
      for (std::size_t k = 0; k < launched.size(); ++k) {
        const std::size_t j = launched[k];
        const sched::Decision* d = k < decisions.size() ? &decisions[k] : nullptr;
        if (d && d->recheck_at_s && *d->recheck_at_s > now) recheck = std::min(recheck, *d->recheck_at_s);
        if (!d || !d->granted) {
          still.push_back(j);
          continue;
        }
        start(j, d->gpus, now);
      }
      again = still.size() < launched.size() && waiting > still.size();
      launched = std::move(still);
    }
  }
  if (last_s > first_s) {
    counts.shared_gpus_mean = shared_integral / (last_s - first_s);
    counts.idle_gpus_mean = idle_integral / (last_s - first_s);
  }
  if (stats) *stats = counts;
  return out;
}

}  // namespace gpulane::sim
