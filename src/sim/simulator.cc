#include "sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <queue>

#include "sched/launch.h"
#include "sched/launch_past_cap.h"
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

namespace {

// One replay of a trace: the daemon's two lines over simulated GPUs, event after event. The queue:
// the jobs not yet handed to a supervisor, per user in submission order; the daemon's own
// sched::PlanLaunches decides which of them join the lease line (at most max_waiting wait there at
// once), in the one line order (sched/line_order.h): with fair share (kDefault) each user's factor
// (sched::FairShareFactor over the users that used something or wait) and the job's age, else
// submission order. The lease line: the launched jobs, in the same order, which sched::Schedule
// decides.
class Replay {
 public:
  Replay(const std::vector<Job>& jobs, const SimOptions& o);
  Result<std::vector<Outcome>> Run(SimStats* stats);

 private:
  using End = std::pair<double, std::size_t>;
  using Head = std::pair<sched::LineKey, std::size_t>;  // (key, user)
  static std::size_t UserCount(const std::vector<Job>& jobs);
  void Refresh(unsigned i);  // state_[i] from gpus_[i]
  sched::Request RequestOf(const Job& j) const;
  sched::LineKey KeyOf(std::size_t j, double now) const;
  void FillQueueHead(double now);
  void Start(std::size_t j, const std::vector<unsigned>& on, double now);
  void Integrate(double now);
  void EndJobs(double now);
  void Arrive(double now);
  void Launch(double now);
  // launched_ in line order at `now`, and line_ their requests.
  void OrderLine(double now);
  bool DecideLine(double now);

  const std::vector<Job>& jobs_;
  const SimOptions& o_;
  std::vector<Outcome> out_;
  std::vector<Gpu> gpus_;
  std::vector<std::vector<unsigned>> placed_;  // GPUs of each running job
  std::priority_queue<End, std::vector<End>, std::greater<End>> ends_;
  sched::Limits limits_;
  std::vector<sched::GpuState> state_;
  const bool fair_;
  const unsigned max_waiting_;
  const std::size_t user_count_;
  std::vector<std::deque<std::size_t>> waiting_of_;  // queued, in submission order
  FairShare shares_;
  std::vector<std::size_t> launched_;
  std::vector<char> in_lease_line_;
  std::size_t waiting_ = 0;  // queued and launched
  std::vector<std::size_t> pos_;
  std::vector<sched::QueuedJob> queue_head_;
  std::vector<sched::Request> line_;
  std::vector<std::size_t> whole_waiting_;  // fragmentation: whole-GPU jobs waiting, by GPUs wanted
  std::size_t next_ = 0;                    // next arrival
  double recheck_ = kInf;
  SimStats counts_;
  // Fragmentation: time integrals of the GPU counts.
  double first_s_ = 0, last_s_ = 0;
  double shared_integral_ = 0, idle_integral_ = 0;
};

std::size_t Replay::UserCount(const std::vector<Job>& jobs) {
  std::size_t user_count = 0;
  for (const Job& j : jobs) user_count = std::max<std::size_t>(user_count, j.user + 1);
  return user_count;
}

Replay::Replay(const std::vector<Job>& jobs, const SimOptions& o)
    : jobs_(jobs),
      o_(o),
      out_(jobs.size()),
      gpus_(o.gpus),
      placed_(jobs.size()),
      state_(o.gpus),
      fair_(o.fair_share && o.policy == sched::PolicyKind::kDefault),
      max_waiting_(o.max_waiting ? o.max_waiting : sched::DefaultMaxWaiting(o.gpus)),
      user_count_(UserCount(jobs)),
      waiting_of_(user_count_),
      shares_(jobs, out_, o, user_count_),
      in_lease_line_(jobs.size(), 0),
      pos_(user_count_, 0),
      whole_waiting_(o.gpus + 1, 0) {
  limits_.policy = o.policy;
  limits_.max_reserve_idle_s = o.max_reserve_idle_s;
  limits_.grants_only = true;
  for (unsigned i = 0; i < o.gpus; ++i) {
    state_[i].index = i;
    state_[i].total_bytes = o.gpu_mem_bytes;
    state_[i].free_bytes = o.gpu_mem_bytes;
    state_[i].util_pct = 0;
  }
  for (unsigned i = 0; i < o.gpus; ++i) Refresh(i);
  first_s_ = last_s_ = jobs.empty() ? 0 : jobs.front().submit_s;
}

void Replay::Refresh(unsigned i) {
  const Gpu& g = gpus_[i];
  sched::GpuState& s = state_[i];
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
    if (!jobs_[j].time_limit_s) return;  // an end nobody knows
    until = std::max(until, out_[j].start_s + *jobs_[j].time_limit_s);
  }
  s.busy_until_s = until;
}

sched::Request Replay::RequestOf(const Job& j) const {
  sched::Request r;
  r.count = j.gpus;
  if (j.mem_bytes) r.mem_bytes = j.mem_bytes;
  r.submit_time_s = j.submit_s;
  r.time_limit_s = j.time_limit_s;
  if (o_.placement == Placement::kMostFree) r.order = sched::Order::kMostFree;
  return r;
}

sched::LineKey Replay::KeyOf(std::size_t j, double now) const {
  return sched::LineKey{0, fair_ ? shares_.PriorityOf(j, now) : 0, static_cast<std::uint64_t>(j), {}};
}

// The head of the queue (as many as PlanLaunches looks at: sched::LaunchLookahead), as a k-way
// merge of the users' queues, each in line order already: PlanLaunches on this head decides
// exactly as on the whole queue, without building it at every event.
void Replay::FillQueueHead(double now) {
  auto after = [](const Head& x, const Head& y) { return sched::LineBefore(y.first, x.first); };
  std::priority_queue<Head, std::vector<Head>, decltype(after)> heads(after);
  std::fill(pos_.begin(), pos_.end(), 0);
  for (std::size_t u = 0; u < user_count_; ++u)
    if (!waiting_of_[u].empty()) heads.push({KeyOf(waiting_of_[u][0], now), u});
  queue_head_.clear();
  while (queue_head_.size() < sched::LaunchLookahead(max_waiting_) && !heads.empty()) {
    const auto [key, u] = heads.top();
    heads.pop();
    sched::QueuedJob q;
    q.id = static_cast<std::int64_t>(waiting_of_[u][pos_[u]++]);
    q.fair_priority = key.line_priority;
    queue_head_.push_back(q);
    // A job launched past the cap leaves its user's queue out of order: passed over here, removed
    // once it is at the front (Launch).
    while (pos_[u] < waiting_of_[u].size() && in_lease_line_[waiting_of_[u][pos_[u]]]) ++pos_[u];
    if (pos_[u] < waiting_of_[u].size()) heads.push({KeyOf(waiting_of_[u][pos_[u]], now), u});
  }
}

// Starts job j on `on` at `now`.
void Replay::Start(std::size_t j, const std::vector<unsigned>& on, double now) {
  if (fair_) shares_.Started(j);
  const Job& job = jobs_[j];
  --waiting_;
  if (!job.mem_bytes) --whole_waiting_[job.gpus];
  Outcome& result = out_[j];
  result.start_s = now;
  const bool stopped = job.time_limit_s && *job.time_limit_s < job.duration_s;
  result.timed_out = stopped;
  result.end_s = now + (stopped ? *job.time_limit_s : job.duration_s);
  placed_[j] = on;
  for (unsigned i : on) {
    Gpu& g = gpus_[i];
    g.jobs.push_back(j);
    if (job.mem_bytes) g.declared += job.mem_bytes;
    else g.exclusive = true;
    Refresh(i);
  }
  ends_.emplace(result.end_s, j);
}

// Adds the state of the GPUs (unchanged since the previous event) over [last_s_, now).
void Replay::Integrate(double now) {
  const double dt = now - last_s_;
  last_s_ = now;
  if (!(dt > 0)) return;
  unsigned shared = 0, idle = 0, exclusive = 0;
  std::uint64_t declared = 0;
  for (const Gpu& g : gpus_) {
    if (g.jobs.empty()) ++idle;
    else if (g.exclusive) ++exclusive;
    else ++shared;
    declared += g.declared;
  }
  shared_integral_ += shared * dt;
  idle_integral_ += idle * dt;
  unsigned smallest = 0;  // fewest GPUs a waiting whole-GPU job wants
  for (unsigned k = 1; k <= o_.gpus && smallest == 0; ++k)
    if (whole_waiting_[k] > 0) smallest = k;
  if (smallest == 0 || idle >= smallest) return;
  const std::uint64_t packed = (declared + o_.gpu_mem_bytes - 1) / o_.gpu_mem_bytes;  // GPUs the shares need at least
  if (o_.gpus - exclusive >= packed + smallest) counts_.fragmented_s += dt;
}

void Replay::EndJobs(double now) {
  while (!ends_.empty() && ends_.top().first <= now) {
    const std::size_t j = ends_.top().second;
    ends_.pop();
    if (fair_) shares_.Ended(j, now);
    for (unsigned i : placed_[j]) {
      Gpu& g = gpus_[i];
      g.jobs.erase(std::find(g.jobs.begin(), g.jobs.end(), j));
      g.declared -= jobs_[j].mem_bytes;
      if (g.jobs.empty()) {
        g.exclusive = false;
        g.free_since = now;
      }
      Refresh(i);
    }
  }
}

void Replay::Arrive(double now) {
  while (next_ < jobs_.size() && jobs_[next_].submit_s <= now) {
    if (!jobs_[next_].mem_bytes) ++whole_waiting_[jobs_[next_].gpus];
    waiting_of_[jobs_[next_].user].push_back(next_);
    if (fair_) shares_.Arrived(next_);
    ++waiting_;
    ++next_;
  }
}

// PlanLaunches on the head of the queue: the jobs it launches join the lease line.
void Replay::Launch(double now) {
  FillQueueHead(now);
  sched::LaunchLimits launch_limits;
  launch_limits.max_waiting = max_waiting_;
  launch_limits.already_waiting = static_cast<unsigned>(launched_.size());
  const sched::LaunchPlan plan = sched::PlanLaunches(
      queue_head_, [](const sched::JobRef&) { return sched::DependencyState::kCompleted; }, launch_limits);
  std::vector<std::int64_t> launch = plan.launch;
  for (std::int64_t id : launch) launched_.push_back(static_cast<std::size_t>(id));
  // Past the cap, as the daemon: those the lease line grants at once behind its waiting jobs.
  if (!plan.capped.empty()) {
    OrderLine(now);
    std::vector<sched::CappedJob> capped;
    for (std::int64_t id : plan.capped) capped.push_back({id, RequestOf(jobs_[static_cast<std::size_t>(id)])});
    for (std::int64_t id : sched::LaunchPastCap({state_, line_, limits_, {}}, capped)) {
      launched_.push_back(static_cast<std::size_t>(id));
      launch.push_back(id);
    }
  }
  for (std::int64_t id : launch) in_lease_line_[static_cast<std::size_t>(id)] = 1;
  // A user's jobs are in line order in submission order (the older, the higher its age), so
  // those launched under the cap are the fronts of their users' queues; one launched past it may
  // be further back (FillQueueHead passes over it until it is at the front).
  for (std::int64_t id : launch)
    for (auto& mine = waiting_of_[jobs_[static_cast<std::size_t>(id)].user]; !mine.empty() && in_lease_line_[mine.front()];)
      mine.pop_front();
}

// One decision of the lease line at `now`: the granted jobs start. True when another decision at
// this instant may start more (something started and jobs are still queued).
void Replay::OrderLine(double now) {
  std::sort(launched_.begin(), launched_.end(),
            [&](std::size_t x, std::size_t y) { return sched::LineBefore(KeyOf(x, now), KeyOf(y, now)); });
  line_.clear();
  for (std::size_t j : launched_) line_.push_back(RequestOf(jobs_[j]));
}

bool Replay::DecideLine(double now) {
  OrderLine(now);
  ++counts_.decisions;
  const std::vector<sched::Decision> decisions = sched::Schedule(state_, line_, limits_);
  recheck_ = kInf;
  std::vector<std::size_t> still;
  for (std::size_t k = 0; k < launched_.size(); ++k) {
    const std::size_t j = launched_[k];
    const sched::Decision* d = k < decisions.size() ? &decisions[k] : nullptr;
    if (d && d->recheck_at_s && *d->recheck_at_s > now) recheck_ = std::min(recheck_, *d->recheck_at_s);
    if (!d || !d->granted) {
      still.push_back(j);
      continue;
    }
    Start(j, d->gpus, now);
  }
  const bool again = still.size() < launched_.size() && waiting_ > still.size();
  launched_ = std::move(still);
  return again;
}

Result<std::vector<Outcome>> Replay::Run(SimStats* stats) {
  while (next_ < jobs_.size() || !ends_.empty() || waiting_ > 0) {
    double now = kInf;
    if (next_ < jobs_.size()) now = jobs_[next_].submit_s;
    if (!ends_.empty()) now = std::min(now, ends_.top().first);
    if (waiting_ > 0) now = std::min(now, recheck_);
    if (!std::isfinite(now))
      return MakeError(ErrorKind::kInternal, StrCat(waiting_, " jobs wait with nothing running and nothing to come (policy ",
                                                    sched::PolicyName(o_.policy), ")"));
    Integrate(now);
    EndJobs(now);
    Arrive(now);
    counts_.max_waiting = std::max(counts_.max_waiting, waiting_);
    if (waiting_ == 0) continue;
    limits_.now_s = now;
    recheck_ = kInf;
    // As in the daemon, a grant is an event (its job starts), after which PlanLaunches fills the
    // lease line again: decide at this instant until nothing more starts or nothing is queued.
    for (bool again = true; again;) {
      if (fair_) shares_.Update(now);
      if (waiting_ > launched_.size()) Launch(now);
      if (launched_.empty()) break;
      again = DecideLine(now);
    }
  }
  if (last_s_ > first_s_) {
    counts_.shared_gpus_mean = shared_integral_ / (last_s_ - first_s_);
    counts_.idle_gpus_mean = idle_integral_ / (last_s_ - first_s_);
  }
  if (stats) *stats = counts_;
  return std::move(out_);
}

}  // namespace

Result<std::vector<Outcome>> Simulate(const std::vector<Job>& jobs, const SimOptions& o, SimStats* stats) {
  for (const Job& j : jobs)
    if (j.gpus > o.gpus || j.gpus == 0 || j.mem_bytes > o.gpu_mem_bytes)
      return MakeError(ErrorKind::kInvalidArgument, StrCat("job ", j.id, " can never start on ", o.gpus, " GPUs"));
  return Replay(jobs, o).Run(stats);
}

}  // namespace gpulane::sim
