#include "sim/metrics.h"

#include <algorithm>
#include <cmath>

namespace gpulane::sim {

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  const std::size_t i = rank < 1 ? 0 : static_cast<std::size_t>(rank) - 1;
  return sorted[std::min(i, sorted.size() - 1)];
}

double JainIndex(const std::vector<double>& values) {
  double sum = 0, squares = 0;
  for (double x : values) {
    sum += x;
    squares += x * x;
  }
  if (values.empty() || squares == 0) return 1;
  return sum * sum / (static_cast<double>(values.size()) * squares);
}

Metrics ComputeMetrics(const std::vector<Job>& jobs, const std::vector<Outcome>& outcomes, unsigned gpus,
                       std::uint64_t gpu_mem_bytes) {
  Metrics m;
  m.jobs = jobs.size();
  if (jobs.empty()) return m;
  std::vector<double> waits, jcts, whole_waits, shared_waits;
  waits.reserve(jobs.size());
  jcts.reserve(jobs.size());
  double first = jobs.front().submit_s, last = 0, used = 0, bsld = 0;
  std::vector<double> user_sum, user_count;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const Job& j = jobs[i];
    const Outcome& o = outcomes[i];
    first = std::min(first, j.submit_s);
    last = std::max(last, o.end_s);
    const double wait = o.start_s - j.submit_s, run = o.end_s - o.start_s;
    waits.push_back(wait);
    (j.mem_bytes ? shared_waits : whole_waits).push_back(wait);
    jcts.push_back(o.end_s - j.submit_s);
    used += GpuShare(j, gpu_mem_bytes) * run;
    const double slowdown = std::max(1.0, (wait + run) / std::max(run, kSlowdownBoundS));
    bsld += slowdown;
    if (j.user >= user_sum.size()) {
      user_sum.resize(j.user + 1, 0);
      user_count.resize(j.user + 1, 0);
    }
    user_sum[j.user] += slowdown;
    user_count[j.user] += 1;
    if (wait > kStarvedWaitS) ++m.starved;
    if (o.timed_out) ++m.timed_out;
  }
  const double n = static_cast<double>(jobs.size());
  m.makespan_s = last - first;
  m.utilisation = m.makespan_s > 0 ? used / (gpus * m.makespan_s) : 0;
  double wait_sum = 0, jct_sum = 0;
  for (double w : waits) wait_sum += w;
  for (double c : jcts) jct_sum += c;
  m.wait_mean_s = wait_sum / n;
  m.jct_mean_s = jct_sum / n;
  m.bsld_mean = bsld / n;
  auto mean_p99 = [](std::vector<double>& v, double* mean, double* p99) {
    double sum = 0;
    for (double x : v) sum += x;
    *mean = v.empty() ? 0 : sum / static_cast<double>(v.size());
    std::sort(v.begin(), v.end());
    *p99 = Percentile(v, 99);
  };
  m.whole_jobs = whole_waits.size();
  mean_p99(whole_waits, &m.whole_wait_mean_s, &m.whole_wait_p99_s);
  mean_p99(shared_waits, &m.shared_wait_mean_s, &m.shared_wait_p99_s);
  std::sort(waits.begin(), waits.end());
  std::sort(jcts.begin(), jcts.end());
  m.wait_median_s = Percentile(waits, 50);
  m.wait_p95_s = Percentile(waits, 95);
  m.wait_p99_s = Percentile(waits, 99);
  m.jct_p99_s = Percentile(jcts, 99);
  std::vector<double> per_user;
  for (std::size_t u = 0; u < user_sum.size(); ++u)
    if (user_count[u] > 0) per_user.push_back(user_sum[u] / user_count[u]);
  m.users = per_user.size();
  m.jain = JainIndex(per_user);
  return m;
}

}  // namespace gpulane::sim
