#include "sched/reserve_idle.h"

#include <algorithm>

namespace gpulane::sched {

double UserIdleClock(const Limits& limits, const Request& r) {
  auto clock = limits.idle_hold_since_by_uid.find(r.uid);
  if (clock != limits.idle_hold_since_by_uid.end()) return clock->second;
  return std::min(r.submit_time_s, limits.now_s.value_or(r.submit_time_s));
}

double IdleHoldSince(const Limits& limits, const Request& r, const GpuState& g) {
  const double user_since = UserIdleClock(limits, r);
  return std::max(user_since, g.free_since_s.value_or(user_since));
}

bool Idle(const GpuState& g) { return g.free_since_s.has_value() && !g.has_context && g.foreign.empty() && g.processes_known; }

void NoteIdleHolds(LineMemory& memory, const std::vector<std::uint32_t>& uids, const std::vector<Decision>& decisions,
                   double now_s, double max_reserve_idle_s) {
  for (std::size_t i = 0; i < uids.size() && i < decisions.size(); ++i) {
    if (!decisions[i].idle_hold_since_s) continue;
    auto [it, fresh] = memory.idle_holds.try_emplace(uids[i], IdleHold{*decisions[i].idle_hold_since_s, now_s});
    if (!fresh) {
      it->second.since_s = std::min(it->second.since_s, *decisions[i].idle_hold_since_s);
      it->second.last_s = now_s;
    }
  }
  std::erase_if(memory.idle_holds, [&](const auto& e) { return now_s - e.second.last_s > max_reserve_idle_s; });
}

std::map<std::uint32_t, double> IdleHoldClocks(const LineMemory& memory) {
  std::map<std::uint32_t, double> out;
  for (const auto& [uid, hold] : memory.idle_holds) out[uid] = hold.since_s;
  return out;
}

}  // namespace gpulane::sched
