#include "telemetry/memory_guard.h"

#include <fmt/format.h>

#include "util/units.h"

namespace gpulane::telemetry {

bool OverDeclared(const GuardedGpu& g, std::uint64_t margin_bytes) {
  if (!g.declared_bytes || !g.used_bytes) return false;
  const std::uint64_t line = *g.declared_bytes + margin_bytes;
  return line >= *g.declared_bytes && *g.used_bytes > line;  // an overflowing line is never crossed
}

std::string OveruseWarning(const std::string& job_id, const GuardedGpu& g, const MemoryGuardSettings& s) {
  const std::string then = s.grace_s > 0
                               ? fmt::format("it is stopped in {} unless it frees memory", FormatSeconds(s.grace_s))
                               : std::string("warned only (anomaly.overuse_grace = 0)");
  return fmt::format("job {} holds {} on GPU {}, over its declared {} (--mem) and the {} margin: {}", job_id,
                     FormatBytes(g.used_bytes.value_or(0)), g.gpu_index, FormatBytes(g.declared_bytes.value_or(0)),
                     FormatBytes(s.margin_bytes), then);
}

std::string OveruseStop(const GuardedGpu& g, const MemoryGuardSettings& s, double over_s) {
  const std::uint64_t declared_bytes = g.declared_bytes.value_or(0);
  return fmt::format("memory over declaration: held {} on GPU {}, over its limit of {} (--mem {} + lease.memory_margin "
                     "{}) for {} (anomaly.overuse_grace {})",
                     FormatMib(g.used_bytes.value_or(0)), g.gpu_index, FormatMib(declared_bytes + s.margin_bytes),
                     FormatMib(declared_bytes), FormatMib(s.margin_bytes), FormatSeconds(over_s),
                     FormatSeconds(s.grace_s));
}

GuardDecision MemoryGuard::Observe(double now_s, const std::vector<GuardedGpu>& gpus) {
  const GuardedGpu* over = nullptr;
  bool known = true;
  for (const GuardedGpu& g : gpus) {
    if (g.declared_bytes && !g.used_bytes) known = false;
    if (!over && OverDeclared(g, s_.margin_bytes)) over = &g;
  }
  if (!over) {
    if (known) over_since_s_.reset();  // under its line on every GPU it shares
    return {};
  }
  if (!over_since_s_) {
    over_since_s_ = now_s;
    return {GuardAction::kWarn, OveruseWarning(job_id_, *over, s_)};
  }
  if (s_.grace_s <= 0 || stopped_ || now_s - *over_since_s_ < s_.grace_s) return {};
  stopped_ = true;
  return {GuardAction::kStop, OveruseStop(*over, s_, now_s - *over_since_s_)};
}

}  // namespace gpulane::telemetry
