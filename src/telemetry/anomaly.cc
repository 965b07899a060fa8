#include "telemetry/anomaly.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "telemetry/sample.h"
#include "util/units.h"

namespace gpulane::telemetry {
namespace {

const std::string& JobText(const JobGpuState& j) { return j.job_text.empty() ? j.job_id : j.job_text; }
std::string Who(const JobGpuState& j) { return fmt::format("job {} ({})", JobText(j), j.user); }

}  // namespace

bool GrowsSteadily(const std::deque<std::pair<double, std::uint64_t>>& points, std::uint64_t min_growth_bytes) {
  if (points.size() < 5) return false;
  const double first = static_cast<double>(points.front().second), last = static_cast<double>(points.back().second);
  const double growth = last - first;
  if (growth < static_cast<double>(min_growth_bytes)) return false;
  double peak = 0;
  for (const auto& [t, bytes] : points) {
    const double b = static_cast<double>(bytes);
    if (b < peak - 0.05 * growth) return false;  // fell back: memory is freed now and then, not leaking
    peak = std::max(peak, b);
  }
  // Least squares of bytes over time: a straight climb, not one step.
  const double n = static_cast<double>(points.size());
  double mt = 0, mb = 0;
  for (const auto& [t, bytes] : points) mt += t, mb += static_cast<double>(bytes);
  mt /= n, mb /= n;
  double stt = 0, stb = 0, sbb = 0;
  for (const auto& [t, bytes] : points) {
    const double dt = t - mt, db = static_cast<double>(bytes) - mb;
    stt += dt * dt, stb += dt * db, sbb += db * db;
  }
  if (stt <= 0 || sbb <= 0) return false;
  const double r2 = stb * stb / (stt * sbb);
  return stb > 0 && r2 >= 0.8;
}

void AnomalyDetector::Raise(AnomalyChanges& changes, Anomaly a) {
  if (current_.count(a.key)) return;
  current_[a.key] = a;
  changes.started.push_back(std::move(a));
}

void AnomalyDetector::End(AnomalyChanges& changes, const std::string& key) {
  if (current_.erase(key)) changes.ended.push_back(key);
}

void AnomalyDetector::Hold(AnomalyChanges& changes, double now_s, Timer& t, bool condition, double after_s,
                           const Anomaly& a) {
  if (!condition) {
    t.since_s.reset();
    End(changes, a.key);
    return;
  }
  if (!t.since_s) t.since_s = now_s;
  if (now_s - *t.since_s >= after_s) Raise(changes, a);
}

void AnomalyDetector::ObserveGpu(AnomalyChanges& changes, double now_s, const GpuState& g) {
  GpuTrack& t = gpus_[g.uuid];
  t.seen_s = now_s;
  Anomaly base;
  base.gpu_uuid = g.uuid;
  base.gpu_index = g.index;

  Anomaly lost = base;
  lost.kind = "gpu_lost";
  lost.key = "gpu_lost:" + g.uuid;
  lost.drains = true;
  lost.message = fmt::format("GPU {} failed ({}): it takes no new jobs while it does; check dmesg and nvidia-smi (a reset or "
                             "a reboot may be needed)",
                             g.index, g.failure.empty() ? "NVML reports it failed" : g.failure);
  if (g.failed) Raise(changes, lost);
  else End(changes, lost.key);

  Anomaly xid = base;
  xid.kind = "xid";
  xid.key = "xid:" + g.uuid;
  xid.drains = true;
  if (!g.xids.empty()) {
    t.last_xid_s = now_s;
    t.last_xid = g.xids.back();
    End(changes, xid.key);  // raised again: the earlier event ends, a new one starts
  }
  if (t.last_xid_s && now_s - *t.last_xid_s < s_.xid_clear_after_s) {
    xid.message = fmt::format("GPU {} raised Xid {}: it takes no new jobs until {} pass without another; check dmesg and "
                              "nvidia-smi -q",
                              g.index, t.last_xid, FormatSeconds(s_.xid_clear_after_s));
    Raise(changes, xid);
  } else {
    End(changes, xid.key);
  }

  Anomaly ghost = base;
  ghost.kind = "ghost";
  ghost.key = "ghost:" + g.uuid;
  const bool known = !g.failed && g.memory_used_bytes && g.process_memory_bytes;
  const std::uint64_t unaccounted =
      known && *g.memory_used_bytes > *g.process_memory_bytes ? *g.memory_used_bytes - *g.process_memory_bytes : 0;
  ghost.message = fmt::format("GPU {} has {} in use that no process accounts for (its processes hold {}): memory left by "
                              "a crashed job, or a process of another container? (nvidia-smi; fuser -v /dev/nvidia*)",
                              g.index, FormatBytes(unaccounted), FormatBytes(g.process_memory_bytes.value_or(0)));
  Hold(changes, now_s, t.ghost, unaccounted >= s_.ghost_min_bytes, s_.ghost_after_s, ghost);

  Anomaly throttle = base;
  throttle.kind = "throttle";
  throttle.key = "throttle:" + g.uuid;
  const std::uint64_t bits = g.clocks_event_reasons.value_or(0) & kThrottleReasonBits;
  throttle.message = fmt::format("GPU {} is slowed to protect itself ({}): check its cooling and power supply", g.index,
                                 ThrottleReasonNames(bits));
  Hold(changes, now_s, t.throttle, !g.failed && bits != 0, s_.throttle_after_s, throttle);
}

void AnomalyDetector::ObserveJob(AnomalyChanges& changes, double now_s, const JobGpuState& j) {
  const std::string track_key = j.lease + ":" + j.gpu_uuid;
  JobGpuTrack& t = jobs_[track_key];
  t.seen_s = now_s;
  Anomaly base;
  base.gpu_uuid = j.gpu_uuid;
  base.gpu_index = j.gpu_index;
  base.job_id = j.job_id;
  base.user = j.user;

  Anomaly idle = base;
  idle.kind = "idle";
  idle.key = "idle:" + track_key;
  idle.message = fmt::format("{} has used GPU {} under {:g} % for {}: data loading, a hang, or a session left open?",
                             Who(j), j.gpu_index, s_.idle_util_pct, FormatSeconds(s_.idle_after_s));
  Hold(changes, now_s, t.idle, j.util_pct && *j.util_pct < s_.idle_util_pct, s_.idle_after_s, idle);
  if (s_.idle_cancel_after_s > 0 && t.idle.since_s && !t.cancel_asked &&
      now_s - *t.idle.since_s >= s_.idle_after_s + s_.idle_cancel_after_s) {
    t.cancel_asked = true;
    changes.cancels.push_back({j.job_id, j.lease, j.user,
                               fmt::format("cancelled: GPU {} idle (under {:g} %) for {}, past its warning and the {} "
                                           "anomaly.idle_cancel_after allows",
                                           j.gpu_index, s_.idle_util_pct, FormatSeconds(now_s - *t.idle.since_s),
                                           FormatSeconds(s_.idle_cancel_after_s)),
                               JobText(j)});
  }

  Anomaly stuck = base;
  stuck.kind = "stuck";
  stuck.key = "stuck:" + track_key;
  const bool busy = j.util_pct && *j.util_pct >= s_.stuck_util_pct && j.memory_bytes;
  if (busy && t.stuck_memory != j.memory_bytes) {
    t.stuck.since_s.reset();  // its memory moved: it is working
    End(changes, stuck.key);
  }
  t.stuck_memory = busy ? j.memory_bytes : std::nullopt;
  stuck.message = fmt::format("{} has kept GPU {} at {:.0f} % with its memory unchanged at {} for {}: a busy loop, or a hang "
                              "in a collective (NCCL)? (py-spy dump, or the job's log)",
                              Who(j), j.gpu_index, j.util_pct.value_or(0), FormatBytes(j.memory_bytes.value_or(0)),
                              FormatSeconds(s_.stuck_after_s));
  Hold(changes, now_s, t.stuck, busy, s_.stuck_after_s, stuck);

  // Leak: one point a thirtieth of the window at most, the window's worth kept.
  if (j.memory_bytes && (t.memory.empty() || now_s - t.memory.back().first >= s_.leak_window_s / 30)) {
    t.memory.emplace_back(now_s, *j.memory_bytes);
    while (t.memory.size() > 1 && now_s - t.memory[1].first >= s_.leak_window_s) t.memory.pop_front();
  }
  Anomaly leak = base;
  leak.kind = "leak";
  leak.key = "leak:" + track_key;
  const bool spans = !t.memory.empty() && now_s - t.memory.front().first >= 0.9 * s_.leak_window_s;
  if (spans && GrowsSteadily(t.memory, s_.leak_min_growth_bytes)) {
    leak.message = fmt::format("{}'s memory on GPU {} grew steadily from {} to {} in {}: a leak (tensors kept across steps, "
                               "a growing cache)?",
                               Who(j), j.gpu_index, FormatBytes(t.memory.front().second), FormatBytes(t.memory.back().second),
                               FormatSeconds(now_s - t.memory.front().first));
    Raise(changes, leak);
  } else if (spans) {
    End(changes, leak.key);
  }

  // Overuse: at the first sample over the line; over when a sample shows it under (not an unknown one).
  Anomaly overuse = base;
  overuse.kind = "overuse";
  overuse.key = "overuse:" + track_key;
  const GuardedGpu guarded{j.gpu_index, j.whole ? std::nullopt : j.declared_bytes, j.memory_bytes};
  if (OverDeclared(guarded, s_.memory_guard.margin_bytes)) {
    overuse.message = OveruseWarning(JobText(j), guarded, s_.memory_guard);
    Raise(changes, overuse);
  } else if (j.memory_bytes) {
    End(changes, overuse.key);
  }

  ObserveForeign(changes, j, t, base);
}

void AnomalyDetector::ObserveForeign(AnomalyChanges& changes, const JobGpuState& j, JobGpuTrack& t, const Anomaly& base) {
  std::set<std::string> seen_before;
  seen_before.swap(t.foreign_seen);
  for (const std::string& process : j.foreign) {
    if (!j.whole) break;
    t.foreign_seen.insert(process);
    if (!seen_before.count(process)) continue;  // once: maybe a process that just ended
    Anomaly foreign = base;
    foreign.kind = "foreign";
    foreign.key = fmt::format("foreign:{}:{}:{}", j.lease, j.gpu_uuid, process);
    foreign.message = fmt::format("{} runs on GPU {}, which {} holds: a program using a GPU by a fixed index "
                                  "(CUDA_VISIBLE_DEVICES unset)?",
                                  process, j.gpu_index, Who(j));
    Raise(changes, foreign);
  }
  // Foreign processes that are gone.
  const std::string prefix = fmt::format("foreign:{}:{}:", j.lease, j.gpu_uuid);
  std::vector<std::string> gone;
  for (auto it = current_.lower_bound(prefix); it != current_.end() && it->first.rfind(prefix, 0) == 0; ++it)
    if (!t.foreign_seen.count(it->first.substr(prefix.size())))
      gone.push_back(it->first);
  for (const auto& key : gone) End(changes, key);
}

AnomalyChanges AnomalyDetector::Observe(double now_s, const std::vector<GpuState>& gpus, const std::vector<JobGpuState>& jobs) {
  AnomalyChanges changes;
  for (const GpuState& g : gpus) ObserveGpu(changes, now_s, g);
  for (const JobGpuState& j : jobs) ObserveJob(changes, now_s, j);
  // What was not seen in this sample (an ended job, a GPU gone from the list) has no anomaly now.
  std::set<std::string> stale;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (it->second.seen_s == now_s) {
      ++it;
      continue;
    }
    stale.insert(it->first);
    it = jobs_.erase(it);
  }
  for (auto it = gpus_.begin(); it != gpus_.end();) {
    if (it->second.seen_s == now_s) {
      ++it;
      continue;
    }
    stale.insert(it->first);
    it = gpus_.erase(it);
  }
  std::vector<std::string> over;
  for (const auto& [key, a] : current_) {
    const std::string track = a.job_id.empty() ? a.gpu_uuid : key.substr(key.find(':') + 1);
    for (const auto& s : stale)
      if (track == s || track.rfind(s + ":", 0) == 0) over.push_back(key);
  }
  for (const auto& key : over) End(changes, key);
  return changes;
}

std::map<std::string, std::string> AnomalyDetector::Drained() const {
  std::map<std::string, std::string> out;
  for (const auto& [key, a] : current_)
    if (a.drains) out[a.gpu_uuid] = a.message;
  return out;
}

}  // namespace gpulane::telemetry
