#include "sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

#include "util/strings.h"

namespace gpulane::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The waiting line as one contiguous run of requests (what sched::Schedule reads) with the job
// index of each beside it. Removing the granted ones moves only the part of the line before the
// last of them (usually a few at the head), not the whole line.
class Line {
 public:
  void Push(sched::Request request, std::size_t job) {
    requests_.push_back(std::move(request));
    jobs_.push_back(job);
  }
  std::span<const sched::Request> Requests() const { return {requests_.data() + head_, requests_.size() - head_}; }
  std::size_t Job(std::size_t i) const { return jobs_[head_ + i]; }
  std::size_t size() const { return requests_.size() - head_; }
  bool empty() const { return size() == 0; }

  // Removes the entries at `positions` (ascending, relative to the head).
  void Remove(const std::vector<std::size_t>& positions) {
    if (positions.empty()) return;
    // Shift the kept entries before the last removed one towards it, back to front.
    std::size_t write = head_ + positions.back();
    std::size_t next = positions.size();  // positions[next - 1] is the next removed one at or below read
    for (std::size_t read = head_ + positions.back() + 1; read-- > head_;) {
      if (next > 0 && read == head_ + positions[next - 1]) {
        --next;
        continue;
      }
      requests_[write] = std::move(requests_[read]);
      jobs_[write] = jobs_[read];
      --write;
    }
    head_ += positions.size();
    if (head_ > 4096 && head_ * 2 > requests_.size()) {
      requests_.erase(requests_.begin(), requests_.begin() + static_cast<std::ptrdiff_t>(head_));
      jobs_.erase(jobs_.begin(), jobs_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
  }

 private:
  std::vector<sched::Request> requests_;
  std::vector<std::size_t> jobs_;
  std::size_t head_ = 0;
};

// One simulated GPU: the jobs on it.
struct Gpu {
  std::vector<std::size_t> jobs;  // running here
  bool exclusive = false;
  std::uint64_t declared = 0;     // memory declared by the shared jobs on it
  double free_since = 0;
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
  Line line;
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

  // Fair share (kDefault): the waiting jobs per user in submission order, each user's ended use
  // (decayed, as of a time) and the running jobs; the line is put in priority order at each decision.
  const bool fair = o.fair_share && o.policy == sched::PolicyKind::kDefault;
  const sched::FairShareSettings& fs = o.fair_share_settings;
  std::size_t user_count = 0;
  for (const Job& j : jobs) user_count = std::max<std::size_t>(user_count, j.user + 1);
  std::vector<std::vector<std::size_t>> waiting_of(fair ? user_count : 0);
  std::vector<double> ended_gpu_s(user_count, 0), ended_at_s(user_count, 0), share(user_count, 1.0);
  for (std::size_t u = 0; u < user_count && u < o.user_names.size(); ++u)
    share[u] = sched::ShareOf(o.user_names[u], {}, fs.shares);
  std::vector<std::size_t> running;
  std::vector<char> started(jobs.size(), 0);
  std::size_t waiting = 0;
  std::vector<sched::Request> ordered;
  std::vector<std::size_t> ordered_jobs;
  std::vector<double> usage(user_count), factor(user_count);
  auto request_of = [&](const Job& j) {
    sched::Request r;
    r.count = j.gpus;
    if (j.mem_bytes) r.mem_bytes = j.mem_bytes;
    r.submit_time_s = j.submit_s;
    r.time_limit_s = j.time_limit_s;
    if (o.placement == Placement::kMostFree) r.order = sched::Order::kMostFree;
    return r;
  };
  // The waiting jobs in the daemon's order: each user's fair-share factor (sched::FairShareFactor
  // over the users that used something or wait), then age; a k-way merge of the users' lines,
  // which are in age order already. Only as much of the order is built as Schedule reads: with
  // grants_only it stops early, and a request's decision depends only on those before it, so a
  // prefix that Schedule did not use up decides exactly as the whole line would.
  using Head = std::pair<double, std::pair<std::size_t, std::size_t>>;  // (priority, (jobs - job, user)): a max-heap
  std::priority_queue<Head> heads;
  std::vector<std::size_t> pos(user_count, 0);
  std::size_t ordered_n = 0;
  auto push_head = [&](std::size_t u, double now) {
    if (pos[u] >= waiting_of[u].size()) return;
    const std::size_t j = waiting_of[u][pos[u]];
    heads.push({sched::PriorityOf(factor[u], now - jobs[j].submit_s, fs).value, {jobs.size() - j, u}});
  };
  auto order_line = [&](double now) {
    double total_usage = 0, total_share = 0;
    for (std::size_t u = 0; u < user_count; ++u) usage[u] = sched::DecayTo(ended_gpu_s[u], ended_at_s[u], now, fs.half_life_s);
    for (std::size_t j : running)
      usage[jobs[j].user] += sched::DecayedUsageGpuS({"", out[j].start_s, std::nullopt, GpuShare(jobs[j], o.gpu_mem_bytes)}, now,
                                                    fs.half_life_s);
    for (std::size_t u = 0; u < user_count; ++u) {
      total_usage += usage[u];
      if (usage[u] > 0 || !waiting_of[u].empty()) total_share += share[u];
    }
    for (std::size_t u = 0; u < user_count; ++u)
      factor[u] = sched::FairShareFactor(total_usage > 0 ? usage[u] / total_usage : 0, total_share > 0 ? share[u] / total_share : 0);
    heads = {};
    std::fill(pos.begin(), pos.end(), 0);
    for (std::size_t u = 0; u < user_count; ++u) push_head(u, now);
    ordered_n = 0;
  };
  // Extends the ordered prefix to `n` requests (fewer when fewer wait).
  auto extend = [&](std::size_t n, double now) {
    if (ordered.size() < n) {
      ordered.resize(n);
      ordered_jobs.resize(n);
    }
    while (ordered_n < n && !heads.empty()) {
      const std::size_t u = heads.top().second.second;
      heads.pop();
      const std::size_t j = waiting_of[u][pos[u]++];
      const Job& job = jobs[j];
      sched::Request& r = ordered[ordered_n];
      r.count = job.gpus;
      r.mem_bytes.reset();
      if (job.mem_bytes) r.mem_bytes = job.mem_bytes;
      r.submit_time_s = job.submit_s;
      r.time_limit_s = job.time_limit_s;
      r.order.reset();
      if (o.placement == Placement::kMostFree) r.order = sched::Order::kMostFree;
      ordered_jobs[ordered_n++] = j;
      push_head(u, now);
    }
  };

  std::size_t next = 0;  // next arrival
  double recheck = kInf;
  std::vector<std::size_t> granted;
  SimStats counts;
  // Fragmentation: whole-GPU jobs waiting, by GPUs wanted; time integrals of the GPU counts.
  std::vector<std::size_t> whole_waiting(o.gpus + 1, 0);
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
      if (fair) {
        const unsigned u = jobs[j].user;
        ended_gpu_s[u] = sched::DecayTo(ended_gpu_s[u], ended_at_s[u], now, fs.half_life_s) +
                         sched::DecayedUsageGpuS({"", out[j].start_s, out[j].end_s, GpuShare(jobs[j], o.gpu_mem_bytes)}, now,
                                                 fs.half_life_s);
        ended_at_s[u] = now;
        running.erase(std::find(running.begin(), running.end(), j));
      }
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
      if (fair) waiting_of[jobs[next].user].push_back(next);
      else line.Push(request_of(jobs[next]), next);
      ++waiting;
      ++next;
    }
    counts.max_waiting = std::max(counts.max_waiting, waiting);
    if (waiting == 0) continue;
    limits.now_s = now;
    ++counts.decisions;
    std::vector<sched::Decision> decisions;
    if (fair) {
      order_line(now);
      for (std::size_t n = 64;; n *= 4) {
        extend(n, now);
        decisions = sched::Schedule(state, std::span<const sched::Request>(ordered.data(), ordered_n), limits);
        if (decisions.size() < ordered_n || heads.empty()) break;  // Schedule stopped before the end, or this is all of it
      }
    } else {
      decisions = sched::Schedule(state, line.Requests(), limits);
    }
    granted.clear();
    recheck = kInf;
    for (std::size_t k = 0; k < decisions.size(); ++k) {
      const sched::Decision& d = decisions[k];
      if (d.recheck_at_s && *d.recheck_at_s > now) recheck = std::min(recheck, *d.recheck_at_s);
      if (!d.granted) continue;
      const std::size_t j = fair ? ordered_jobs[k] : line.Job(k);
      granted.push_back(k);
      started[j] = 1;
      if (fair) running.push_back(j);
      const Job& job = jobs[j];
      if (!job.mem_bytes) --whole_waiting[job.gpus];
      Outcome& result = out[j];
      result.start_s = now;
      const bool stopped = job.time_limit_s && *job.time_limit_s < job.duration_s;
      result.timed_out = stopped;
      result.end_s = now + (stopped ? *job.time_limit_s : job.duration_s);
      placed[j] = d.gpus;
      for (unsigned i : d.gpus) {
        Gpu& g = gpus[i];
        g.jobs.push_back(j);
        if (job.mem_bytes) g.declared += job.mem_bytes;
        else g.exclusive = true;
        refresh(i);
      }
      ends.emplace(result.end_s, j);
    }
    waiting -= granted.size();
    if (fair) {
      for (std::size_t k : granted) {
        auto& mine = waiting_of[jobs[ordered_jobs[k]].user];
        if (!mine.empty()) std::erase_if(mine, [&](std::size_t j) { return started[j] != 0; });
      }
    } else {
      line.Remove(granted);
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
