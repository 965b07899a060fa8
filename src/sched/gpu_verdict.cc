// The per-GPU rules of the lease policy (sched/policy.h's Rules) and the changes a decision makes
// to its working copy of the GPUs: gpu_verdict.h.
#include "sched/gpu_verdict.h"

#include <algorithm>
#include <cmath>

#include "util/strings.h"
#include "util/units.h"

namespace gpulane::sched::detail {
namespace {

// Free memory not promised to a shared lease yet; nullopt when NVML does not report it.
std::optional<std::uint64_t> FreeNow(const GpuState& g) {
  if (!g.free_bytes) return std::nullopt;
  return *g.free_bytes > g.unallocated_reservation_bytes ? *g.free_bytes - g.unallocated_reservation_bytes : 0;
}

// The most memory that can ever be free on `g` (its total is known): the total less what the
// driver keeps for itself.
std::uint64_t EverFree(const GpuState& g) {
  const std::uint64_t reserved = g.reserved_bytes.value_or(0);
  return *g.total_bytes > reserved ? *g.total_bytes - reserved : 0;
}

// What can never change while the machine stays as it is.
std::optional<Verdict> JudgeNever(const Context& c, const GpuState& g, const Request& r) {
  const Limits& limits = c.limits;
  auto never = [&](auto&& why) { return std::optional<Verdict>(Make(c, Wait::kNever, kInf, why)); };
  if (!Allows(r, g.uuid)) return never([] { return "not among the GPUs this job may use (CUDA_VISIBLE_DEVICES, a Slurm job's GPUs, --gpus, --partition)"; });
  if (!g.usable) return never([&] { return g.unusable_reason; });
  if ((r.mem_bytes || r.min_free_bytes) && (!g.total_bytes || !g.free_bytes))
    return never([] { return "memory not reported by NVML"; });
  // What can ever be free: all of it but what the driver keeps (total when NVML does not say).
  const std::uint64_t ever_free = EverFree(g);
  const char* ever_words = ever_free < *g.total_bytes ? " free at most" : " total";
  if (r.mem_bytes && *r.mem_bytes + limits.margin_bytes > ever_free)
    return never([&] {
      const std::string most = FormatBytesApart(*r.mem_bytes + limits.margin_bytes, ever_free).second;
      return StrCat(FormatBytes(*r.mem_bytes), " + ", FormatBytes(limits.margin_bytes), " margin > ", most, ever_words);
    });
  if (r.min_free_bytes && *r.min_free_bytes > ever_free)
    return never([&] {
      const auto [most, asked] = FormatBytesApart(ever_free, *r.min_free_bytes);
      return StrCat(most, ever_words, " < ", asked);
    });
  if (!g.processes_known && !r.share_foreign)
    return never([] { return "its processes are not reported by NVML (unknown is not free; --share-foreign to use it anyway)"; });
  if (!g.processes_known && g.one_context_only)
    return never([] { return "EXCLUSIVE_PROCESS compute mode and its processes are not reported by NVML"; });
  return std::nullopt;
}

// Why a reserved GPU is not for `r`, for people.
std::string HeldReason(const Context& c, const Hold& h, const Request& r) {
  // Its place in line and whose, never "#1", which reads as job 1.
  std::string out = StrCat("held for an earlier request, ", Ordinal(static_cast<unsigned>(h.by + 1)), " in line");
  if (h.request && !h.request->user.empty()) out += StrCat(" (", h.request->user, "'s)");
  if (!c.backfills || !std::isfinite(h.start_s)) return out;
  out += StrCat(" from ", FormatSeconds(h.start_s - c.now), " on; ");
  if (!r.time_limit_s) return out + "only a job with a --time-limit that ends before then may use it";
  return out + StrCat("this job's time limit of ", FormatSeconds(*r.time_limit_s), " ends later");
}

// `g` once its preemptible jobs have given way: free, with their processes' memory back.
GpuState Vacated(const GpuState& g) {
  GpuState v = g;
  v.exclusive_holder.reset();
  v.shared_leases = 0;
  v.unallocated_reservation_bytes = 0;
  v.has_context = false;
  v.busy_until_s.reset();
  v.preemptible_holder.reset();
  if (v.free_bytes) *v.free_bytes += g.preemptible_used_bytes;
  v.preemptible_used_bytes = 0;
  return v;
}

}  // namespace

std::string Plural(unsigned n, const char* word) { return StrCat(n, " ", word, n == 1 ? "" : "s"); }

Verdict Judge(const Context& c, const GpuState& g, const Request& r, const std::vector<Hold>& holds) {
  if (auto never = JudgeNever(c, g, r)) return *never;
  if (g.drained) return Make(c, Wait::kForeign, kInf, [&] { return StrCat("drained: ", *g.drained); });
  const Limits& limits = c.limits;
  const Hold& hold = holds[g.index];
  // Usable for `r` no sooner than its leases end and an earlier reservation of it has ended.
  const double lease_end = c.timed && g.busy_until_s ? *g.busy_until_s : kInf;
  const double after_hold = hold.by >= 0 ? hold.end_s : -kInf;
  const double leased_ready = std::max(lease_end, after_hold);
  const double unknown = kInf;
  if (g.exclusive_holder) return Make(c, Wait::kLease, leased_ready, [&] { return StrCat("leased by ", *g.exclusive_holder); });
  bool backfill = false;
  // Hysteresis (sched/preemption.h): a preemptible request leaves a GPU that a request that is not
  // preemptible would start on now, or preempt for, to it.
  if (IsPreemptible(r) && c.wanted && (*c.wanted)[g.index] >= 0)
    return Make(c, Wait::kLease, kInf, [&] {
      const Request& w = c.line[static_cast<std::size_t>((*c.wanted)[g.index])];
      return StrCat("wanted by ", w.user.empty() ? std::string("another user") : w.user,
                    "'s job waiting in line, which is not preemptible (a preemptible job leaves it to it)");
    });
  // A preemptible request may take a GPU reserved for a waiting one (it gives way when that one
  // can start), but not one reserved for a preemption, nor once it gave way before.
  if (hold.by >= 0 && !(IsPreemptible(r) && !hold.preempting && r.preemptions == 0)) {
    // Backfill: it may start ahead of the reservation when its time limit ends before that starts.
    backfill = c.backfills && r.time_limit_s && std::isfinite(hold.start_s) && c.now + *r.time_limit_s <= hold.start_s;
    if (!backfill) return Make(c, Wait::kLease, hold.end_s, [&] { return HeldReason(c, hold, r); });
  }
  if (!r.mem_bytes && g.shared_leases > 0)
    return Make(c, Wait::kLease, leased_ready, [&] { return StrCat("shared by ", Plural(g.shared_leases, "gpulane job")); });
  if (g.one_context_only && g.has_context)
    return Make(c, g.shared_leases ? Wait::kLease : Wait::kForeign, g.shared_leases ? leased_ready : unknown, [&] {
      return StrCat("EXCLUSIVE_PROCESS compute mode and already in use",
                    g.foreign.empty() ? std::string() : StrCat(" by ", g.foreign.front()));
    });
  if (!r.share_foreign && !g.foreign.empty())
    return Make(c, Wait::kForeign, unknown, [&] { return StrCat("in use by ", g.foreign.front()); });
  const Wait memory_wait = g.shared_leases ? Wait::kLease : Wait::kForeign;
  const double memory_ready = g.shared_leases ? leased_ready : unknown;
  if (r.mem_bytes) {
    const std::uint64_t free_now = *FreeNow(g);
    const std::uint64_t room = free_now > limits.margin_bytes ? free_now - limits.margin_bytes : 0;
    if (room < *r.mem_bytes)
      return Make(c, memory_wait, memory_ready,
                  [&] { return StrCat(FormatBytes(room), " free < ", FormatBytes(*r.mem_bytes), " declared"); });
  }
  if (r.min_free_bytes && *FreeNow(g) < *r.min_free_bytes)
    return Make(c, memory_wait, memory_ready,
                [&] { return StrCat(FormatBytes(*FreeNow(g)), " free < ", FormatBytes(*r.min_free_bytes)); });
  if (r.max_util_pct) {
    if (!g.util_pct) return Make(c, Wait::kForeign, unknown, [] { return "utilisation not reported"; });
    if (*g.util_pct > *r.max_util_pct)
      return Make(c, Wait::kForeign, unknown, [&] { return StrCat(*g.util_pct, "% busy > ", *r.max_util_pct, "%"); });
  }
  Verdict v;
  v.wait = Wait::kNow;
  v.ready_s = c.now;
  v.backfill = backfill;
  return v;
}

bool Open(const Context& c, const GpuState& g, const Hold& h) {
  if (!g.usable || g.drained || g.exclusive_holder || (g.one_context_only && g.has_context)) return false;
  if (h.by >= 0 && !(c.backfills && std::isfinite(h.start_s) && h.start_s > c.now)) return false;
  if (g.shared_leases > 0 && g.free_bytes && *FreeNow(g) <= c.limits.margin_bytes) return false;
  return true;
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
    if (order == Order::kBestFit) {
      // Every GPU here fits the request, so the room left after placing it is its free memory
      // less the same amount (declared + margin) on each: least free first, unreported last.
      const std::int64_t fa = free_of(a), fb = free_of(b);
      if (fa != fb) return fb < 0 || (fa >= 0 && fa < fb);
      if (gpus[a].shared_leases != gpus[b].shared_leases) return gpus[a].shared_leases < gpus[b].shared_leases;
    }
    if (order == Order::kLeastUtil && util_of(a) != util_of(b)) return util_of(a) < util_of(b);
    if (free_of(a) != free_of(b)) return free_of(a) > free_of(b);
    if (util_of(a) != util_of(b)) return util_of(a) < util_of(b);
    return a < b;
  });
  return indices;
}

void Occupy(const Context& c, std::vector<GpuState>& gpus, const Request& r, const std::vector<unsigned>& chosen) {
  const std::optional<double> ends =
      c.timed && r.time_limit_s ? std::optional<double>(c.now + *r.time_limit_s) : std::nullopt;
  for (unsigned i : chosen) {
    GpuState& g = gpus[i];
    const bool leased = g.exclusive_holder || g.shared_leases > 0;
    g.busy_until_s = !leased ? ends : (ends && g.busy_until_s ? std::optional<double>(std::max(*ends, *g.busy_until_s))
                                                             : std::nullopt);
    g.free_since_s.reset();
    // Given to a preemptible job: preemptible while only such jobs hold it.
    if (!IsPreemptible(r)) g.preemptible_holder.reset();
    else if (!leased) g.preemptible_holder = c.explain ? StrCat(r.user.empty() ? "an earlier request" : r.user, " (earlier in line)")
                                                       : std::string("an earlier request");
    g.has_context = true;
    if (r.mem_bytes) {
      ++g.shared_leases;
      g.unallocated_reservation_bytes += *r.mem_bytes;
    } else {
      g.exclusive_holder = c.explain ? StrCat(r.user.empty() ? "an earlier request" : r.user, " (earlier in line)")
                                     : std::string("an earlier request");
    }
  }
}

std::vector<unsigned> PreemptionSet(const Context& c, const std::vector<GpuState>& gpus, const Request& r,
                                    const std::vector<Hold>& holds, const std::vector<unsigned>& free_now,
                                    const std::function<bool(unsigned, unsigned)>& linked) {
  std::vector<unsigned> vacatable;
  for (const GpuState& g : gpus) {
    if (!g.preemptible_holder || holds[g.index].preempting) continue;
    if (Judge(c, Vacated(g), r, holds).wait == Wait::kNow) vacatable.push_back(g.index);
  }
  if (vacatable.empty() || free_now.size() + vacatable.size() < r.count) return {};
  const Order order = EffectiveOrder(r);
  std::vector<unsigned> ranked = Rank(gpus, free_now, order);
  for (unsigned i : Rank(gpus, vacatable, order)) ranked.push_back(i);
  return ChooseLinkedSet(ranked, r.count, linked);
}

Decision DecideMig(const Context& c, std::span<const MigUnit> units, std::vector<bool>& taken, const Request& r) {
  Decision d;
  std::vector<std::string> profiles;
  for (std::size_t i = 0; i < units.size(); ++i) {
    const MigUnit& u = units[i];
    if (u.profile && std::find(profiles.begin(), profiles.end(), *u.profile) == profiles.end()) profiles.push_back(*u.profile);
    if (u.profile != r.mig_profile || !(Allows(r, u.uuid) || Allows(r, u.gpu_uuid))) continue;
    auto wait = [&](std::string why, bool never = false) {
      if (!c.explain) return;
      d.reasons.push_back(StrCat(u.uuid, " (GPU", u.gpu_index, " ", *u.profile, "): ", why));
      if (never) d.never.push_back(d.reasons.back());
    };
    if (!u.gpu_usable) {
      wait("its GPU failed", true);
      continue;
    }
    if (!u.processes_known && !r.share_foreign) {
      wait("its processes are not reported by NVML (unknown is not free; --share-foreign to use it anyway)", true);
      continue;
    }
    ++d.possible;
    if (u.holder) wait(StrCat("leased by ", *u.holder));
    else if (taken[i]) wait("given to an earlier request");
    else if (!u.foreign.empty() && !r.share_foreign) wait(StrCat("in use by ", u.foreign.front()));
    else if (!d.granted) {
      d.granted = true;
      d.gpus = {u.gpu_index};
      d.mig_uuid = u.uuid;
      taken[i] = true;
    }
  }
  if (d.granted) {
    d.reasons.clear();
    d.never.clear();
    return d;
  }
  d.impossible = d.possible == 0;
  if (d.impossible && c.explain && d.never.empty())
    d.never.push_back(StrCat("no MIG device of profile ", r.mig_profile, " that this job may use; ",
                             profiles.empty() ? std::string("no GPU here is in MIG mode")
                                              : StrCat("MIG profiles here: ", Join(profiles, ", "))));
  return d;
}

}  // namespace gpulane::sched::detail
