#include "sched/policy.h"

#include <algorithm>

#include "util/strings.h"
#include "util/units.h"

namespace gpulane::sched {
namespace {

// How soon a GPU could become usable for a request; lower is sooner.
enum class Wait { kNow = 0, kLease = 1, kForeign = 2, kNever = 3 };

struct Verdict {
  Wait wait = Wait::kNever;
  std::string reason;
};

std::string Plural(unsigned n, const char* word) { return StrCat(n, " ", word, n == 1 ? "" : "s"); }

// Free memory not promised to a shared lease yet; nullopt when NVML does not report it.
std::optional<std::uint64_t> FreeNow(const GpuState& g) {
  if (!g.free_bytes) return std::nullopt;
  return *g.free_bytes > g.unallocated_reservation_bytes ? *g.free_bytes - g.unallocated_reservation_bytes : 0;
}

// What can never change while the machine stays as it is.
std::optional<Verdict> JudgeNever(const GpuState& g, const Request& r, const Limits& limits) {
  auto never = [](std::string why) { return Verdict{Wait::kNever, std::move(why)}; };
  if (!Allows(r, g.uuid)) return never("not among the GPUs this job may use (CUDA_VISIBLE_DEVICES, --gpus)");
  if (!g.usable) return never(g.unusable_reason);
  if ((r.mem_bytes || r.min_free_bytes) && (!g.total_bytes || !g.free_bytes))
    return never("memory not reported by NVML");
  if (r.mem_bytes && *r.mem_bytes + limits.margin_bytes > *g.total_bytes)
    return never(StrCat(FormatBytes(*r.mem_bytes), " + ", FormatBytes(limits.margin_bytes), " margin > ",
                        FormatBytes(*g.total_bytes), " total"));
  if (r.min_free_bytes && *r.min_free_bytes > *g.total_bytes)
    return never(StrCat(FormatBytes(*g.total_bytes), " total < ", FormatBytes(*r.min_free_bytes)));
  if (!g.processes_known && !r.share_foreign)
    return never("its processes are not reported by NVML (unknown is not free; --share-foreign to use it anyway)");
  if (!g.processes_known && g.one_context_only)
    return never("EXCLUSIVE_PROCESS compute mode and its processes are not reported by NVML");
  return std::nullopt;
}

Verdict Judge(const GpuState& g, const Request& r, const Limits& limits, const std::vector<int>& reserved_by) {
  if (auto never = JudgeNever(g, r, limits)) return *never;
  if (g.exclusive_holder) return {Wait::kLease, StrCat("leased by ", *g.exclusive_holder)};
  if (reserved_by[g.index] >= 0) return {Wait::kLease, StrCat("held for an earlier request (#", reserved_by[g.index] + 1, ")")};
  if (!r.mem_bytes && g.shared_leases > 0) return {Wait::kLease, StrCat("shared by ", Plural(g.shared_leases, "gpulane job"))};
  if (g.one_context_only && g.has_context)
    return {g.shared_leases ? Wait::kLease : Wait::kForeign,
            StrCat("EXCLUSIVE_PROCESS compute mode and already in use",
                   g.foreign.empty() ? std::string() : StrCat(" by ", g.foreign.front()))};
  if (!r.share_foreign && !g.foreign.empty()) return {Wait::kForeign, StrCat("in use by ", g.foreign.front())};
  const Wait memory_wait = g.shared_leases ? Wait::kLease : Wait::kForeign;
  if (r.mem_bytes) {
    const std::uint64_t free_now = *FreeNow(g);
    const std::uint64_t room = free_now > limits.margin_bytes ? free_now - limits.margin_bytes : 0;
    if (room < *r.mem_bytes)
      return {memory_wait, StrCat(FormatBytes(room), " free < ", FormatBytes(*r.mem_bytes), " declared")};
  }
  if (r.min_free_bytes && *FreeNow(g) < *r.min_free_bytes)
    return {memory_wait, StrCat(FormatBytes(*FreeNow(g)), " free < ", FormatBytes(*r.min_free_bytes))};
  if (r.max_util_pct) {
    if (!g.util_pct) return {Wait::kForeign, "utilisation not reported"};
    if (*g.util_pct > *r.max_util_pct) return {Wait::kForeign, StrCat(*g.util_pct, "% busy > ", *r.max_util_pct, "%")};
  }
  return {Wait::kNow, ""};
}

std::vector<unsigned> Rank(const std::vector<GpuState>& gpus, std::vector<unsigned> indices, Order order) {
  // Unreported values rank after every reported one (never as if they were 0 % busy or all free).
  auto free_of = [&](unsigned i) -> std::int64_t {
    auto f = FreeNow(gpus[i]);
    return f ? static_cast<std::int64_t>(*f) : -1;
  };
  auto util_of = [&](unsigned i) { return gpus[i].util_pct.value_or(101); };
  std::stable_sort(indices.begin(), indices.end(), [&](unsigned a, unsigned b) {
    if (order == Order::kPci) return a < b;
    if (order == Order::kLeastUtil && util_of(a) != util_of(b)) return util_of(a) < util_of(b);
    if (free_of(a) != free_of(b)) return free_of(a) > free_of(b);
    if (util_of(a) != util_of(b)) return util_of(a) < util_of(b);
    return a < b;
  });
  return indices;
}

// Applies a grant to the working copy of the GPUs, so later requests see it.
void Occupy(std::vector<GpuState>& gpus, const Request& r, const std::vector<unsigned>& chosen) {
  for (unsigned i : chosen) {
    gpus[i].has_context = true;
    if (r.mem_bytes) {
      ++gpus[i].shared_leases;
      gpus[i].unallocated_reservation_bytes += *r.mem_bytes;
    } else {
      gpus[i].exclusive_holder = StrCat(r.user.empty() ? "an earlier request" : r.user, " (earlier in line)");
    }
  }
}

}  // namespace

std::vector<unsigned> ChooseLinkedSet(const std::vector<unsigned>& ranked, unsigned count,
                                      const std::function<bool(unsigned, unsigned)>& linked) {
  if (count <= 1 || ranked.size() <= count)
    return {ranked.begin(), ranked.begin() + std::min<std::size_t>(count, ranked.size())};
  for (std::size_t start = 0; start < ranked.size(); ++start) {
    std::vector<unsigned> set{ranked[start]};
    for (unsigned candidate : ranked) {
      if (set.size() == count) break;
      if (std::find(set.begin(), set.end(), candidate) != set.end()) continue;
      if (std::all_of(set.begin(), set.end(), [&](unsigned s) { return linked(s, candidate); }))
        set.push_back(candidate);
    }
    if (set.size() == count) return set;
  }
  return {ranked.begin(), ranked.begin() + count};
}

std::vector<Decision> Schedule(std::vector<GpuState> gpus, const std::vector<Request>& line, const Limits& limits) {
  for (unsigned i = 0; i < gpus.size(); ++i) gpus[i].index = i;
  auto linked = [&](unsigned a, unsigned b) {
    const auto& peers = gpus[a].nvlink_peers;
    return std::find(peers.begin(), peers.end(), b) != peers.end();
  };
  std::vector<int> reserved_by(gpus.size(), -1);  // position (0-based among waiters) holding each GPU
  std::vector<Decision> out;
  unsigned waiting = 0;
  for (const Request& r : line) {
    Decision d;
    std::vector<unsigned> now, possible;
    std::vector<Verdict> verdicts(gpus.size());
    for (const GpuState& g : gpus) {
      verdicts[g.index] = Judge(g, r, limits, reserved_by);
      if (verdicts[g.index].wait == Wait::kNow) now.push_back(g.index);
      if (verdicts[g.index].wait != Wait::kNever) possible.push_back(g.index);
    }
    if (now.size() >= r.count) {
      d.granted = true;
      d.gpus = ChooseLinkedSet(Rank(gpus, now, r.order), r.count, linked);
      Occupy(gpus, r, d.gpus);
      out.push_back(std::move(d));
      continue;
    }
    d.position = ++waiting;
    d.possible = static_cast<unsigned>(possible.size());
    d.impossible = possible.size() < r.count;
    for (unsigned i = 0; i < gpus.size(); ++i) {
      if (verdicts[i].wait == Wait::kNow) continue;
      d.reasons.push_back(StrCat("GPU", i, ": ", verdicts[i].reason));
      if (verdicts[i].wait == Wait::kNever) d.never.push_back(d.reasons.back());
    }
    if (!d.impossible) {
      // Reserve the GPUs it could use soonest: free now, then leased, then held by outsiders.
      std::stable_sort(possible.begin(), possible.end(),
                       [&](unsigned a, unsigned b) { return verdicts[a].wait < verdicts[b].wait; });
      for (unsigned k = 0; k < r.count; ++k) {
        if (reserved_by[possible[k]] < 0) reserved_by[possible[k]] = static_cast<int>(d.position - 1);
        d.gpus.push_back(possible[k]);
      }
    }
    out.push_back(std::move(d));
  }
  return out;
}

std::string ImpossibleReason(const Request& r, const Decision& d, unsigned gpu_count) {
  const bool memory = r.mem_bytes.has_value();
  return StrCat("asked for ", Plural(r.count, "GPU"), memory ? StrCat(" with ", FormatBytes(*r.mem_bytes), " each") : "",
                " but only ", d.possible, " of the ", Plural(gpu_count, "GPU"), " here can ever qualify",
                d.never.empty() ? std::string() : StrCat(" (", Join(d.never, "; "), ")"), ": ask for fewer",
                memory ? " or less memory" : "");
}

Result<std::vector<unsigned>> GrantedNow(const Request& r, const Decision& d, unsigned gpu_count) {
  if (d.granted) return d.gpus;
  if (d.impossible) return MakeError(ErrorKind::kInvalidArgument, ImpossibleReason(r, d, gpu_count));
  const unsigned qualify = gpu_count - static_cast<unsigned>(d.reasons.size());
  return MakeError(ErrorKind::kNotEnoughGpus,
                   StrCat("too few GPUs free now: ", qualify, " of ", Plural(r.count, "requested GPU"), " qualify (",
                          Join(d.reasons, "; "), "); 'gpulane run' without --no-wait waits for them"));
}

}  // namespace gpulane::sched
