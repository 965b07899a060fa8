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
  while (next < jobs.size() || !ends.empty() || !line.empty()) {
    double now = kInf;
    if (next < jobs.size()) now = jobs[next].submit_s;
    if (!ends.empty()) now = std::min(now, ends.top().first);
    if (!line.empty()) now = std::min(now, recheck);
    if (!std::isfinite(now))
      return MakeError(ErrorKind::kInternal, StrCat(line.size(), " jobs wait with nothing running and nothing to come (policy ",
                                                    sched::PolicyName(o.policy), ")"));
    integrate(now);
    while (!ends.empty() && ends.top().first <= now) {
      const std::size_t j = ends.top().second;
      ends.pop();
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
      const Job& j = jobs[next];
      sched::Request r;
      r.count = j.gpus;
      if (j.mem_bytes) r.mem_bytes = j.mem_bytes;
      r.submit_time_s = j.submit_s;
      r.time_limit_s = j.time_limit_s;
      if (o.placement == Placement::kMostFree) r.order = sched::Order::kMostFree;
      if (!j.mem_bytes) ++whole_waiting[j.gpus];
      line.Push(std::move(r), next);
      ++next;
    }
    counts.max_waiting = std::max(counts.max_waiting, line.size());
    if (line.empty()) continue;
    limits.now_s = now;
    ++counts.decisions;
    const std::vector<sched::Decision> decisions = sched::Schedule(state, line.Requests(), limits);
    granted.clear();
    recheck = kInf;
    for (std::size_t k = 0; k < decisions.size(); ++k) {
      const sched::Decision& d = decisions[k];
      if (d.recheck_at_s && *d.recheck_at_s > now) recheck = std::min(recheck, *d.recheck_at_s);
      if (!d.granted) continue;
      const std::size_t j = line.Job(k);
      granted.push_back(k);
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
    line.Remove(granted);
  }
  if (last_s > first_s) {
    counts.shared_gpus_mean = shared_integral / (last_s - first_s);
    counts.idle_gpus_mean = idle_integral / (last_s - first_s);
  }
  if (stats) *stats = counts;
  return out;
}

}  // namespace gpulane::sim
