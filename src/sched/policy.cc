#include "sched/policy.h"

#include <algorithm>
#include <fmt/format.h>

#include "util/units.h"

namespace gpulane::sched {
namespace {

// How soon a GPU could become usable for a request; lower is sooner.
enum class Wait { kNow = 0, kLease = 1, kForeign = 2, kNever = 3 };

struct Verdict {
  Wait wait = Wait::kNever;
  std::string reason;
};

constexpr const char* kReservedPrefix = "held for an earlier request";

Verdict Judge(const GpuState& g, const Request& r, const Limits& limits, const std::vector<int>& reserved_by) {
  if (std::find(r.allowed.begin(), r.allowed.end(), g.index) == r.allowed.end())
    return {Wait::kNever, "not among the GPUs this job may use"};
  if (!g.usable) return {Wait::kNever, g.unusable_reason};
  if (r.mem_bytes && g.total_bytes && *r.mem_bytes + limits.margin_bytes > g.total_bytes)
    return {Wait::kNever, fmt::format("{} + {} margin > {} total", FormatBytes(*r.mem_bytes),
                                      FormatBytes(limits.margin_bytes), FormatBytes(g.total_bytes))};
  if (r.min_free_bytes && g.total_bytes && *r.min_free_bytes > g.total_bytes)
    return {Wait::kNever, fmt::format("{} total < {}", FormatBytes(g.total_bytes), FormatBytes(*r.min_free_bytes))};
  if (g.exclusive_holder) return {Wait::kLease, fmt::format("leased by {}", *g.exclusive_holder)};
  if (reserved_by[g.index] >= 0) return {Wait::kLease, fmt::format("{} (#{})", kReservedPrefix, reserved_by[g.index] + 1)};
  if (!r.mem_bytes && g.shared_leases > 0)
    return {Wait::kLease, fmt::format("shared by {} gpulane job{}", g.shared_leases, g.shared_leases > 1 ? "s" : "")};
  if (r.mem_bytes && g.exclusive_process_mode && g.shared_leases > 0)
    return {Wait::kLease, "EXCLUSIVE_PROCESS compute mode: one job at most"};
  if (!r.share_foreign && !g.foreign.empty()) return {Wait::kForeign, fmt::format("in use by {}", g.foreign.front())};
  const std::uint64_t outstanding = g.unallocated_reservation_bytes;
  const std::uint64_t free_now = g.free_bytes > outstanding ? g.free_bytes - outstanding : 0;
  if (r.mem_bytes) {
    const std::uint64_t room = free_now > limits.margin_bytes ? free_now - limits.margin_bytes : 0;
    if (room < *r.mem_bytes)
      return {g.shared_leases ? Wait::kLease : Wait::kForeign,
              fmt::format("{} free < {} declared", FormatBytes(room), FormatBytes(*r.mem_bytes))};
  }
  if (r.min_free_bytes && free_now < *r.min_free_bytes)
    return {g.shared_leases ? Wait::kLease : Wait::kForeign,
            fmt::format("{} free < {}", FormatBytes(free_now), FormatBytes(*r.min_free_bytes))};
  if (r.max_util_pct) {
    if (!g.util_pct) return {Wait::kForeign, "utilisation not reported"};
    if (*g.util_pct > *r.max_util_pct)
      return {Wait::kForeign, fmt::format("{}% busy > {}%", *g.util_pct, *r.max_util_pct)};
  }
  return {Wait::kNow, ""};
}

std::vector<unsigned> Rank(const std::vector<GpuState>& gpus, std::vector<unsigned> indices, Order order) {
  auto free_of = [&](unsigned i) { return gpus[i].free_bytes - std::min(gpus[i].free_bytes, gpus[i].unallocated_reservation_bytes); };
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
    if (r.mem_bytes) {
      ++gpus[i].shared_leases;
      gpus[i].unallocated_reservation_bytes += *r.mem_bytes;
    } else {
      gpus[i].exclusive_holder = fmt::format("an earlier request ({})", r.id);
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
    d.id = r.id;
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
    for (unsigned i = 0; i < gpus.size(); ++i)
      if (verdicts[i].wait != Wait::kNow) d.reasons.push_back(fmt::format("GPU{}: {}", i, verdicts[i].reason));
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

}  // namespace gpulane::sched
