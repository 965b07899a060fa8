// gpulane simulate: replay a job trace on a virtual machine through the scheduling policies
// (sim/, which calls sched::Schedule) and print how each policy did. Thin: options, output.
#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "sched/launch.h"
#include "sched/policy.h"
#include "sim/metrics.h"
#include "sim/plot.h"
#include "sim/simulator.h"
#include "sim/trace.h"
#include "util/exit_codes.h"
#include "util/strings.h"
#include "util/units.h"

namespace gpulane::cli {
namespace {

struct SimulateOptions {
  std::string trace;
  std::string format = "csv";
  unsigned gpus = 8;
  std::string gpu_mem = "80GiB";
  std::string policies = "fifo,firstfit,easy,default";
  std::string placements = "bestfit";
  std::optional<unsigned> max_gpus_per_job;
  std::string oversize = "clip";
  std::optional<double> load;
  std::string time_limit_from = "input";
  std::optional<unsigned> users;
  std::optional<std::size_t> limit_jobs;
  std::string max_reserve_idle = "10m";
  bool json = false;
  std::string per_job_csv;
  std::string plot;
  bool no_fair_share = false;
  std::string half_life = "1d";
  double weight_age = sched::kDefaultWeightAge;
  std::string max_age = "7d";
  unsigned max_waiting = 0;  // daemon.max_waiting; 0: the daemon's default
};

// Seconds for a table: "45 s", "12.3 min", "5.2 h", "3.1 d".
std::string Short(double s) {
  if (s < 120) return fmt::format("{:.0f} s", s);
  if (s < 7200) return fmt::format("{:.1f} min", s / 60);
  if (s < 172800) return fmt::format("{:.1f} h", s / 3600);
  return fmt::format("{:.1f} d", s / 86400);
}

nlohmann::json MetricsJson(const sim::Metrics& m) {
  return {{"jobs", m.jobs},           {"utilisation", m.utilisation}, {"wait_mean_s", m.wait_mean_s},
          {"wait_median_s", m.wait_median_s}, {"wait_p95_s", m.wait_p95_s}, {"wait_p99_s", m.wait_p99_s},
          {"jct_mean_s", m.jct_mean_s}, {"jct_p99_s", m.jct_p99_s},     {"bounded_slowdown_mean", m.bsld_mean},
          {"makespan_s", m.makespan_s}, {"jain_slowdown", m.jain},      {"users", m.users},
          {"starved_24h", m.starved},   {"timed_out", m.timed_out},     {"whole_jobs", m.whole_jobs},
          {"whole_wait_mean_s", m.whole_wait_mean_s}, {"whole_wait_p99_s", m.whole_wait_p99_s},
          {"shared_wait_mean_s", m.shared_wait_mean_s}, {"shared_wait_p99_s", m.shared_wait_p99_s}};
}

// The machine and the settings of every run, the policy and the placement aside.
sim::SimOptions BaseOptions(const SimulateOptions& o, std::uint64_t gpu_mem_bytes, double idle_s, double half_life_s,
                            double max_age_s, const std::vector<std::string>& users) {
  sim::SimOptions base;
  base.gpus = o.gpus;
  base.max_waiting = o.max_waiting;
  base.gpu_mem_bytes = gpu_mem_bytes;
  base.max_reserve_idle_s = idle_s;
  base.fair_share = !o.no_fair_share;
  base.fair_share_settings.half_life_s = half_life_s;
  base.fair_share_settings.weight_age = o.weight_age;
  base.fair_share_settings.max_age_s = max_age_s;
  base.user_names = users;
  return base;
}

// The options checked and parsed.
struct SimSettings {
  sim::Format format{};
  std::uint64_t gpu_mem_bytes = 0;
  double idle_s = 0, half_life_s = 0, max_age_s = 0;
  std::vector<sched::PolicyKind> policies;
  std::vector<sim::Placement> placements;
  sim::TimeLimitFrom limit_from;
};

Error SimOptionError(std::string line) { return MakeError(ErrorKind::kInvalidArgument, std::move(line)); }

// --policy and --placement: comma-separated lists.
Status ParsePolicyLists(const SimulateOptions& o, SimSettings& s) {
  for (const std::string& name : Split(o.policies, ',')) {
    auto p = sched::ParsePolicy(std::string(Trim(name)));
    if (!p) return SimOptionError(StrCat("--policy ", name, ": give fifo, firstfit, easy or default (several: comma-separated)"));
    s.policies.push_back(*p);
  }
  for (const std::string& name : Split(o.placements, ',')) {
    auto p = sim::ParsePlacement(std::string(Trim(name)));
    if (!p) return SimOptionError(StrCat("--placement ", name, ": give bestfit or mostfree (both: comma-separated)"));
    s.placements.push_back(*p);
  }
  return Status::Ok();
}

// Durations and sizes, each error naming its option.
Status ParseSimQuantities(const SimulateOptions& o, SimSettings& s) {
  auto gpu_mem = ParseSizeBytes(o.gpu_mem);
  if (!gpu_mem) return gpu_mem.error();
  s.gpu_mem_bytes = *gpu_mem;
  auto idle = ParseDurationS(o.max_reserve_idle, "m");
  if (!idle) return SimOptionError("--max-reserve-idle: " + idle.error().message);
  s.idle_s = *idle;
  auto half_life = ParseDurationS(o.half_life, "h");
  if (!half_life) return SimOptionError("--fair-share-half-life: " + half_life.error().message);
  if (!(*half_life >= 60)) return SimOptionError("--fair-share-half-life: give at least 1min, e.g. 1d");
  s.half_life_s = *half_life;
  auto max_age = ParseDurationS(o.max_age, "h");
  if (!max_age) return SimOptionError("--priority-max-age: " + max_age.error().message);
  if (!(*max_age >= 60)) return SimOptionError("--priority-max-age: give at least 1min, e.g. 7d");
  s.max_age_s = *max_age;
  return Status::Ok();
}

Result<SimSettings> CheckSimulateOptions(const SimulateOptions& o) {
  SimSettings s;
  auto format = sim::ParseFormat(o.format);
  if (!format) return SimOptionError(StrCat("--format ", o.format, ": give csv, msr-itp, philly or alibaba"));
  s.format = *format;
  if (o.gpus < 1 || o.gpus > sched::kMaxGpuCount) return SimOptionError(StrCat("--gpus ", o.gpus, ": give 1 to ", sched::kMaxGpuCount));
  if (Status q = ParseSimQuantities(o, s); !q.ok()) return q.error();
  if (!(o.weight_age >= 0)) return SimOptionError("--priority-weight-age: give a number >= 0, e.g. 1");
  if (Status l = ParsePolicyLists(o, s); !l.ok()) return l.error();
  if (o.oversize != "clip" && o.oversize != "drop") return SimOptionError(StrCat("--oversize ", o.oversize, ": give clip or drop"));
  if (o.load && !(*o.load > 0)) return SimOptionError("--load: give a number > 0, e.g. 0.9");
  if (o.users && *o.users < 1) return SimOptionError("--users: give at least 1");
  auto limit_from = sim::ParseTimeLimitFrom(o.time_limit_from);
  if (!limit_from) return limit_from.error();
  s.limit_from = *limit_from;
  return s;
}

// The trace read and transformed to the machine (--gpus, --load, --time-limit-from, ...).
struct MachineTrace {
  sim::Trace trace;
  std::size_t jobs_read = 0;
  double read_s = 0;
};

Result<MachineTrace> ReadForMachine(const SimulateOptions& o, const SimSettings& s) {
  const auto t0 = std::chrono::steady_clock::now();
  auto trace = sim::ReadTrace(o.trace, s.format, s.gpu_mem_bytes);
  if (!trace) return trace.error();
  MachineTrace out{std::move(trace).value(), 0, 0};
  out.jobs_read = out.trace.jobs.size();
  sim::TransformOptions t;
  t.machine_gpus = o.gpus;
  t.gpu_mem_bytes = s.gpu_mem_bytes;
  t.max_gpus_per_job = o.max_gpus_per_job;
  t.drop_oversize = o.oversize == "drop";
  t.limit_jobs = o.limit_jobs;
  t.users = o.users;
  t.time_limit = s.limit_from;
  t.load = o.load;
  if (Status st = sim::Transform(out.trace, t); !st.ok()) return st.error();
  out.read_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

struct PolicyRun {
  sched::PolicyKind policy;
  sim::Placement placement;
  std::vector<sim::Outcome> outcomes;
  sim::Metrics metrics;
  sim::SimStats stats;
  double wall_s = 0;
};

// Every policy with every placement, in the order given.
Result<std::vector<PolicyRun>> RunPolicies(const SimulateOptions& o, const SimSettings& s, const sim::Trace& trace) {
  std::vector<PolicyRun> runs;
  const sim::SimOptions base = BaseOptions(o, s.gpu_mem_bytes, s.idle_s, s.half_life_s, s.max_age_s, trace.users);
  for (sched::PolicyKind p : s.policies)
    for (sim::Placement placement : s.placements) {
      sim::SimOptions so = base;
      so.policy = p;
      so.placement = placement;
      const auto start = std::chrono::steady_clock::now();
      PolicyRun run{p, placement};
      auto outcomes = sim::Simulate(trace.jobs, so, &run.stats);
      if (!outcomes) return outcomes.error();
      run.outcomes = std::move(outcomes).value();
      run.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      run.metrics = sim::ComputeMetrics(trace.jobs, run.outcomes, o.gpus, s.gpu_mem_bytes);
      runs.push_back(std::move(run));
    }
  return runs;
}

Status WritePerJobCsv(const std::string& path, const sim::Trace& trace, const std::vector<PolicyRun>& runs) {
  std::ofstream csv(path, std::ios::trunc);
  if (!csv) return MakeError(ErrorKind::kIo, StrCat("cannot write ", path));
  csv << "policy,job,user,gpus,mem_bytes,submit_s,time_limit_s,duration_s,start_s,end_s,wait_s,timed_out,placement\n";
  for (const PolicyRun& r : runs)
    for (std::size_t i = 0; i < trace.jobs.size(); ++i) {
      const sim::Job& j = trace.jobs[i];
      const sim::Outcome& x = r.outcomes[i];
      csv << fmt::format("{},{},{},{},{},{:.3f},{},{:.3f},{:.3f},{:.3f},{:.3f},{},{}\n", sched::PolicyName(r.policy), j.id,
                         trace.users[j.user], j.gpus, j.mem_bytes, j.submit_s,
                         j.time_limit_s ? fmt::format("{:.3f}", *j.time_limit_s) : std::string(), j.duration_s, x.start_s,
                         x.end_s, x.start_s - j.submit_s, x.timed_out ? 1 : 0, sim::PlacementName(r.placement));
    }
  if (!csv.flush()) return MakeError(ErrorKind::kIo, StrCat("cannot write ", path));
  return Status::Ok();
}

Status WriteSimPlot(const SimulateOptions& o, const SimSettings& s, const sim::Trace& trace, const std::vector<PolicyRun>& runs) {
  std::vector<sim::PolicySeries> series;
  const bool both_placements = s.placements.size() > 1;
  for (const PolicyRun& r : runs)
    series.push_back({both_placements ? StrCat(sched::PolicyName(r.policy), " ", sim::PlacementName(r.placement))
                                      : std::string(sched::PolicyName(r.policy)),
                      r.outcomes});
  const std::string title = fmt::format("{} ({}): {} jobs on {} GPUs, offered load {:.2f}, time limits from {}", o.trace, o.format,
                                        trace.jobs.size(), o.gpus, trace.offered_load, o.time_limit_from);
  std::ofstream page(o.plot, std::ios::trunc);
  page << sim::PlotHtml(title, trace.jobs, series, o.gpus, s.gpu_mem_bytes);
  if (!page.flush()) return MakeError(ErrorKind::kIo, StrCat("--plot: cannot write ", o.plot));
  return Status::Ok();
}

void PrintSimJson(const SimulateOptions& o, const SimSettings& s, const MachineTrace& read, const std::vector<PolicyRun>& runs) {
  const sim::Trace& trace = read.trace;
  nlohmann::json out;
  out["trace"] = {{"path", o.trace}, {"format", o.format}, {"jobs_read", read.jobs_read}, {"jobs", trace.jobs.size()},
                  {"users", trace.users.size()}, {"offered_load", trace.offered_load}, {"notes", trace.notes},
                  {"read_s", read.read_s}};
  out["machine"] = {{"gpus", o.gpus}, {"gpu_mem_bytes", s.gpu_mem_bytes}, {"max_reserve_idle_s", s.idle_s},
                    {"time_limit_from", o.time_limit_from}, {"fair_share", !o.no_fair_share},
                    {"fair_share_half_life_s", s.half_life_s}, {"priority_weight_age", o.weight_age}, {"priority_max_age_s", s.max_age_s},
                    {"max_waiting", o.max_waiting ? o.max_waiting : sched::DefaultMaxWaiting(o.gpus)}};
  out["policies"] = nlohmann::json::array();
  for (const PolicyRun& r : runs) {
    nlohmann::json p = MetricsJson(r.metrics);
    p["policy"] = sched::PolicyName(r.policy);
    p["placement"] = sim::PlacementName(r.placement);
    p["shared_gpus_mean"] = r.stats.shared_gpus_mean;
    p["idle_gpus_mean"] = r.stats.idle_gpus_mean;
    p["fragmented_s"] = r.stats.fragmented_s;
    p["decisions"] = r.stats.decisions;
    p["max_waiting"] = r.stats.max_waiting;
    p["wall_s"] = r.wall_s;
    out["policies"].push_back(std::move(p));
  }
  fmt::print("{}\n", out.dump(2));
}

void PrintSimTable(const SimulateOptions& o, const SimSettings& s, const sim::Trace& trace, const std::vector<PolicyRun>& runs) {
  fmt::print("trace {} ({}): {} jobs on {} GPUs of {}, offered load {:.3f}, time limits from {}\n", o.trace, o.format,
             trace.jobs.size(), o.gpus, FormatBytes(s.gpu_mem_bytes), trace.offered_load, o.time_limit_from);
  for (const std::string& note : trace.notes) fmt::print("  {}\n", note);
  fmt::print("\n{:<9} {:<9} {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>5} {:>7} {:>9} {:>6} {:>6} {:>9}\n", "policy",
             "placement", "util", "wait mean", "median", "p95", "p99", "JCT mean", "JCT p99", "bsld", "makespan", "jain", "starved",
             "whole wt", "shared", "idle", "frag");
  for (const PolicyRun& r : runs) {
    const sim::Metrics& m = r.metrics;
    fmt::print("{:<9} {:<9} {:>4.1f}% {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8.2f} {:>9} {:>5.3f} {:>7} {:>9} {:>6.2f} {:>6.2f} {:>9}\n",
               sched::PolicyName(r.policy), sim::PlacementName(r.placement), 100 * m.utilisation, Short(m.wait_mean_s),
               Short(m.wait_median_s), Short(m.wait_p95_s), Short(m.wait_p99_s), Short(m.jct_mean_s), Short(m.jct_p99_s), m.bsld_mean,
               Short(m.makespan_s), m.jain, m.starved, Short(m.whole_wait_mean_s), r.stats.shared_gpus_mean, r.stats.idle_gpus_mean,
               Short(r.stats.fragmented_s));
  }
  fmt::print("\nbsld: mean bounded slowdown (10 s bound); jain: Jain's index over {} users' mean slowdowns; starved: waited > 24 h\n",
             runs.empty() ? 0 : runs.front().metrics.users);
  fmt::print("whole wt: mean wait of whole-GPU jobs; shared, idle: mean GPUs partly used by shares, with nothing on them; frag: time a\n"
             "whole-GPU job waited for GPUs that packing the shares tighter would have left free\n");
}

int RunSimulate(const SimulateOptions& o) {
  auto settings = CheckSimulateOptions(o);
  if (!settings) return Fail(settings.error());
  auto read = ReadForMachine(o, *settings);
  if (!read) return Fail(read.error());
  auto runs = RunPolicies(o, *settings, read->trace);
  if (!runs) return Fail(runs.error());
  if (!o.per_job_csv.empty())
    if (Status s = WritePerJobCsv(o.per_job_csv, read->trace, *runs); !s.ok()) return Fail(s.error());
  if (!o.plot.empty())
    if (Status s = WriteSimPlot(o, *settings, read->trace, *runs); !s.ok()) return Fail(s.error());
  if (o.json) PrintSimJson(o, *settings, *read, *runs);
  else PrintSimTable(o, *settings, read->trace, *runs);
  return kExitOk;
}

}  // namespace

void RegisterSimulate(CLI::App& app, Runner* run, const os::Env&) {
  auto o = std::make_shared<SimulateOptions>();
  CLI::App* sub = app.add_subcommand(
      "simulate", "Replay a job trace on a virtual machine of N GPUs through the scheduling policies and compare them");
  sub->add_option("trace", o->trace, "The trace: a CSV of submit_s,duration_s,gpus,mem_bytes,user,time_limit_s, or a public trace (--format)")
      ->required();
  sub->add_option("--format", o->format, "csv (default), msr-itp (a clusterNN.csv or their folder), philly, alibaba");
  sub->add_option("--gpus", o->gpus, "GPUs of the simulated machine (default 8)");
  sub->add_option("--gpu-mem", o->gpu_mem, "Memory of each simulated GPU (default 80GiB)");
  sub->add_option("--policy", o->policies, "Policies to compare, comma-separated: fifo,firstfit,easy,default (default: all four)");
  sub->add_option("--placement", o->placements,
                  "Where shares go: bestfit (fullest GPU that fits, the default), mostfree (most free first, as before); both: comma-separated");
  sub->add_option("--max-gpus-per-job", o->max_gpus_per_job, "Jobs asking for more GPUs are clipped or dropped (--oversize; default: --gpus)");
  sub->add_option("--oversize", o->oversize, "What to do with jobs over --max-gpus-per-job: clip (default) or drop");
  sub->add_option("--load", o->load, "Scale inter-arrival times so the offered load is this fraction of the machine, e.g. 0.9");
  sub->add_option("--time-limit-from", o->time_limit_from,
                  "Jobs' time limits: input (the CSV's column; none for public traces), duration, factor:K (K x duration), none");
  sub->add_option("--users", o->users, "Map the trace's users onto K (traces without users: K users by a hash, default 8)");
  sub->add_option("--limit-jobs", o->limit_jobs, "Simulate only the first N jobs");
  sub->add_option("--max-reserve-idle", o->max_reserve_idle, "default policy: longest hold of a free GPU for an unknown start (default 10m)");
  sub->add_flag("--no-fair-share", o->no_fair_share,
                "default policy: keep the waiting jobs in submission order instead of the daemon's fair-share order");
  sub->add_option("--fair-share-half-life", o->half_life, "default policy: half-life of past GPU use (default 1d, as sched.fair_share_half_life)");
  sub->add_option("--priority-weight-age", o->weight_age, "default policy: weight of the age factor (as sched.priority_weight_age)");
  sub->add_option("--priority-max-age", o->max_age, "default policy: the age factor reaches 1 after this long (as sched.priority_max_age, default 7d)");
  sub->add_flag("--json", o->json, "Print the results as JSON");
  sub->add_option("--max-waiting", o->max_waiting,
                  "Jobs the daemon lets wait in the lease line at once, the rest in its queue (as daemon.max_waiting; "
                  "default 2 per GPU, at least 4)")
      ->check(CLI::Range(1u, 1000000u));  // "Value 0 not in range 1 to 1000000"
  sub->add_option("--per-job-csv", o->per_job_csv, "Write every job's submit, start, end and wait per policy to this CSV file");
  sub->add_option("--plot", o->plot, "Write an HTML page (inline SVG) comparing the policies: CDF of waits, utilisation over time");
  sub->callback([o, run] { *run = [o] { return RunSimulate(*o); }; });
}

}  // namespace gpulane::cli
