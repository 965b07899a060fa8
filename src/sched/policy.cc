#include "sched/policy.h"

#include "sched/preemption.h"
#include "sched/reserve_idle.h"
#include "sched/user_limits.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/strings.h"
#include "util/units.h"

namespace gpulane::sched {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// How soon a GPU could become usable for a request; lower is sooner.
enum class Wait { kNow = 0, kLease = 1, kForeign = 2, kNever = 3 };

struct Verdict {
  Wait wait = Wait::kNever;
  std::string reason;      // empty when the decision does not explain (Limits::grants_only)
  double ready_s = kInf;   // when it is expected to be usable for this request (kInf: unknown)
  bool backfill = false;   // usable now only by starting ahead of an earlier request's reservation
};

// A GPU reserved for a waiting request: by whom, from when, until when (kInf: unknown).
struct Hold {
  int by = -1;  // 0-based position among the waiters; -1: not reserved
  double start_s = kInf;
  double end_s = kInf;
  bool preempting = false;  // reserved for a request that preempts its preemptible jobs
};

bool IsPreemptible(const Request& r) { return r.preemptible != Preemptible::kNo; }

// What every verdict of one decision shares.
struct Context {
  const Limits& limits;
  bool timed = false;    // limits.now_s is set: times mean something
  double now = 0;
  bool explain = true;   // build the reason strings
  bool backfills = false;
  // Per GPU, the place in line of a request that is not preemptible and wants it now
  // (WantedByWaiters); null: nobody (or no preemptible request in line).
  const std::vector<int>* wanted = nullptr;
  std::span<const Request> line;
};

template <typename Why>
Verdict Make(const Context& c, Wait wait, double ready_s, Why&& why) {
  Verdict v;
  v.wait = wait;
  v.ready_s = ready_s;
  if (c.explain) v.reason = why();
  return v;
}

std::string Plural(unsigned n, const char* word) { return StrCat(n, " ", word, n == 1 ? "" : "s"); }

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
  std::string out = StrCat("held for an earlier request (#", h.by + 1, ")");
  if (!c.backfills || !std::isfinite(h.start_s)) return out;
  out += StrCat(" from ", FormatSeconds(h.start_s - c.now), " on; ");
  if (!r.time_limit_s) return out + "only a job with a --time-limit that ends before then may use it";
  return out + StrCat("this job's time limit of ", FormatSeconds(*r.time_limit_s), " ends later");
}

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

// Whether a later request could still start on `g` (grants_only's early end). False only when no
// request could: Judge would answer something other than kNow for every one.
bool Open(const Context& c, const GpuState& g, const Hold& h) {
  if (!g.usable || g.drained || g.exclusive_holder || (g.one_context_only && g.has_context)) return false;
  if (h.by >= 0 && !(c.backfills && std::isfinite(h.start_s) && h.start_s > c.now)) return false;
  if (g.shared_leases > 0 && g.free_bytes && *FreeNow(g) <= c.limits.margin_bytes) return false;
  return true;
}

// std::stable_sort of the first `n` of `v` without its buffer (an allocation per call): insertion
// sort, which is stable too, so the order is the same; the lists are one entry per GPU.
template <typename Less>
void StableSort(std::vector<unsigned>& v, std::size_t n, Less less) {
  for (std::size_t i = 1; i < n; ++i) {
    const unsigned x = v[i];
    std::size_t j = i;
    for (; j > 0 && less(x, v[j - 1]); --j) v[j] = v[j - 1];
    v[j] = x;
  }
}

// `indices` (GPUs that qualify for the request now) best first in `order` (request.h Order).
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

// Applies a grant to the working copy of the GPUs, so later requests see it.
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

// For a request that is not preemptible and cannot start now: the GPUs it would take if the
// preemptible jobs on some gave way (free ones first, then the fewest preemptible ones in the
// request's order), or nothing when even that is not enough.
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

// The decision for a request of a MIG profile (Request::mig_profile) over `units`; `taken` marks
// those granted earlier in this decision.
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

}  // namespace

const char* PolicyName(PolicyKind policy) {
  switch (policy) {
    case PolicyKind::kDefault: return "default";
    case PolicyKind::kFifo: return "fifo";
    case PolicyKind::kFirstFit: return "firstfit";
    case PolicyKind::kEasy: return "easy";
  }
  return "default";
}

std::optional<PolicyKind> ParsePolicy(const std::string& name) {
  for (PolicyKind p : {PolicyKind::kDefault, PolicyKind::kFifo, PolicyKind::kFirstFit, PolicyKind::kEasy})
    if (name == PolicyName(p)) return p;
  return std::nullopt;
}

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

std::vector<Decision> Schedule(std::vector<GpuState> gpus, std::span<const Request> line, const Limits& limits,
                               std::span<const MigUnit> mig_units) {
  std::vector<bool> mig_taken(mig_units.size(), false);
  const unsigned n = static_cast<unsigned>(gpus.size());
  for (unsigned i = 0; i < n; ++i) gpus[i].index = i;
  auto linked = [&](unsigned a, unsigned b) {
    const auto& peers = gpus[a].nvlink_peers;
    return std::find(peers.begin(), peers.end(), b) != peers.end();
  };
  const PolicyKind policy = limits.policy;
  Context c{limits};
  c.timed = limits.now_s.has_value();
  c.now = limits.now_s.value_or(0);
  c.explain = !limits.grants_only;
  c.backfills = c.timed && (policy == PolicyKind::kDefault || policy == PolicyKind::kEasy);
  const std::vector<int> wanted = WantedByWaiters(gpus, line, limits, mig_units);
  if (!wanted.empty()) c.wanted = &wanted;
  c.line = line;
  std::vector<Hold> holds(n);
  std::vector<Decision> out;
  if (!limits.grants_only) out.reserve(line.size());
  unsigned waiting = 0;
  // grants_only: waiters with nothing to say are only counted, and written out (position alone)
  // when a decision after them is; those after the last such decision are left out.
  unsigned deferred = 0, first_deferred = 0;  // how many, and the position of the first
  auto defer_wait = [&] {
    if (deferred++ == 0) first_deferred = waiting + 1;
    ++waiting;
  };
  auto emit = [&](Decision&& d) {
    for (unsigned i = 0; i < deferred; ++i) out.emplace_back().position = first_deferred + i;
    deferred = 0;
    out.push_back(std::move(d));
  };
  bool fifo_blocked = false;   // kFifo: an earlier request waits, so nothing starts
  bool easy_reserved = false;  // kEasy: the first waiter has reserved
  std::vector<Verdict> verdicts(n);
  std::vector<unsigned> free_now, backfill_now, possible;
  bool changed = true;  // grants_only: GPUs or reservations changed since `open` was counted
  unsigned open = 0;    // grants_only: GPUs a later request could still start on
  unsigned open_whole = 0;      // grants_only: of those, free and not reserved
  std::vector<double> windows;  // grants_only: free reserved ones, when their reservations start
  // Whether a request that waits changes anything for those behind it (a reservation, fifo's block).
  auto waiting_matters = [&] {
    return policy == PolicyKind::kDefault || policy == PolicyKind::kFifo || (policy == PolicyKind::kEasy && !easy_reserved);
  };
  std::map<std::uint32_t, unsigned> in_use_by_uid;
  if (!limits.max_gpus_by_uid.empty()) in_use_by_uid = limits.gpus_in_use_by_uid;
  for (std::size_t k = 0; k < line.size(); ++k) {
    const Request& r = line[k];
    // Its user's limits.max_gpus: over it, it waits and reserves nothing (it cannot start, so it
    // must not keep GPUs from anyone).
    if (auto cap = limits.max_gpus_by_uid.find(r.uid); cap != limits.max_gpus_by_uid.end()) {
      const unsigned held = in_use_by_uid[r.uid];
      if (auto why = GpuLimitReason(LimitsConfig{cap->second, {}, {}, {}}, r.user, held, r.count)) {
        if (limits.grants_only) {
          defer_wait();
          continue;
        }
        Decision d;
        d.position = ++waiting;
        d.reasons.push_back(*why);
        emit(std::move(d));
        continue;
      }
    }
    // A MIG device: decided apart (its GPU takes no whole-GPU request), and it blocks nobody.
    if (!r.mig_profile.empty()) {
      Decision d = DecideMig(c, mig_units, mig_taken, r);
      if (!d.granted) d.position = ++waiting;
      else if (!limits.max_gpus_by_uid.empty()) in_use_by_uid[r.uid] += 1;
      emit(std::move(d));
      continue;
    }
    if (limits.grants_only && k > 0) {
      if (changed) {  // a grant or a reservation since the last count
        open = 0;
        open_whole = 0;
        windows.clear();
        for (unsigned i = 0; !fifo_blocked && i < n; ++i) {
          if (!Open(c, gpus[i], holds[i])) continue;
          ++open;
          if (gpus[i].shared_leases > 0) continue;
          if (holds[i].by < 0) ++open_whole;
          else windows.push_back(holds[i].start_s);
        }
        changed = false;
      }
      if (open == 0) break;  // nothing later can start: the rest wait, undecided
      // Too few GPUs left for it, and waiting changes nothing for the requests behind it.
      unsigned room = open;
      if (!r.mem_bytes) {
        room = open_whole;
        for (double start : windows) room += r.time_limit_s && c.now + *r.time_limit_s <= start ? 1 : 0;
      }
      if (r.count > room && !waiting_matters()) {
        defer_wait();
        continue;
      }
    }
    Decision d;
    free_now.clear();
    backfill_now.clear();
    possible.clear();
    for (unsigned i = 0; i < n; ++i) {
      Verdict& v = verdicts[i];
      v = Judge(c, gpus[i], r, holds);
      if (fifo_blocked && v.wait == Wait::kNow && !IsPreemptible(r))
        v = Make(c, Wait::kLease, c.now, [] { return std::string("free, but an earlier request waits (fifo: nothing starts ahead of it)"); });
      if (v.wait == Wait::kNow) (v.backfill ? backfill_now : free_now).push_back(i);
      if (v.wait != Wait::kNever) possible.push_back(i);
    }
    const Order order = EffectiveOrder(r);
    if (free_now.size() >= r.count) {
      d.granted = true;
      d.gpus = ChooseLinkedSet(Rank(gpus, free_now, order), r.count, linked);
    } else if (free_now.size() + backfill_now.size() >= r.count) {
      // Backfill: every unreserved free GPU, then the best reserved ones it ends in time for.
      std::vector<unsigned> ranked = Rank(gpus, free_now, order);
      for (unsigned i : Rank(gpus, backfill_now, order)) ranked.push_back(i);
      d.granted = true;
      d.gpus = ChooseLinkedSet(ranked, r.count, linked);
    }
    if (d.granted) {
      changed = true;
      if (!limits.max_gpus_by_uid.empty()) in_use_by_uid[r.uid] += r.count;
      Occupy(c, gpus, r, d.gpus);
      emit(std::move(d));
      continue;
    }
    // It could start if preemptible jobs gave way: it reserves those GPUs and names them.
    if (!IsPreemptible(r) && std::any_of(gpus.begin(), gpus.end(), [](const GpuState& g) { return g.preemptible_holder.has_value(); })) {
      if (std::vector<unsigned> chosen = PreemptionSet(c, gpus, r, holds, free_now, linked); !chosen.empty()) {
        changed = true;
        d.position = ++waiting;
        d.possible = static_cast<unsigned>(possible.size());
        const double end = c.timed && r.time_limit_s ? c.now + *r.time_limit_s : kInf;
        for (unsigned i : chosen) {
          if (gpus[i].preemptible_holder) {
            d.preempt.push_back(i);
            if (c.explain) d.reasons.push_back(StrCat("GPU", i, ": preempting ", *gpus[i].preemptible_holder, ", a preemptible job"));
          }
          holds[i] = Hold{static_cast<int>(d.position - 1), c.now, end, true};
        }
        d.gpus = std::move(chosen);
        if (c.timed) d.start_s = c.now;
        if (policy == PolicyKind::kEasy) easy_reserved = true;
        if (policy == PolicyKind::kFifo) fifo_blocked = true;
        emit(std::move(d));
        continue;
      }
    }
    if (limits.grants_only && !waiting_matters()) {
      defer_wait();
      continue;
    }
    d.position = ++waiting;
    d.possible = static_cast<unsigned>(possible.size());
    d.impossible = possible.size() < r.count;
    if (c.explain) {
      for (unsigned i = 0; i < n; ++i) {
        if (verdicts[i].wait == Wait::kNow) continue;
        d.reasons.push_back(StrCat("GPU", i, ": ", verdicts[i].reason));
        if (verdicts[i].wait == Wait::kNever) d.never.push_back(d.reasons.back());
      }
    }
    if (!d.impossible) {
      changed = true;
      // Wait for the GPUs it could use soonest: by when they are expected usable, then free now,
      // leased, held by outsiders.
      StableSort(possible, possible.size(), [&](unsigned a, unsigned b) {
        if (verdicts[a].ready_s != verdicts[b].ready_s) return verdicts[a].ready_s < verdicts[b].ready_s;
        return verdicts[a].wait < verdicts[b].wait;
      });
      // A preemptible request blocks nobody: it reserves nothing.
      const bool preemptible = IsPreemptible(r);
      const bool reserves = !preemptible && (policy == PolicyKind::kDefault || policy == PolicyKind::kFifo ||
                                             (policy == PolicyKind::kEasy && !easy_reserved));
      if (policy == PolicyKind::kEasy && !preemptible) easy_reserved = true;
      if (policy == PolicyKind::kFifo && !preemptible) fifo_blocked = true;
      double start = c.now;
      for (unsigned k2 = 0; k2 < r.count; ++k2) start = std::max(start, verdicts[possible[k2]].ready_s);
      const bool start_known = c.timed && std::isfinite(start);
      if (start_known) {
        d.start_s = start;
        // Of the GPUs usable by then, reserve the busy ones first: a GPU free now that it does not
        // need stays free for anyone (EASY's extra nodes).
        std::size_t usable = r.count;
        while (usable < possible.size() && verdicts[possible[usable]].ready_s <= start) ++usable;
        StableSort(possible, usable, [&](unsigned a, unsigned b) { return verdicts[a].ready_s > verdicts[b].ready_s; });
      }
      const double end = start_known && r.time_limit_s ? start + *r.time_limit_s : kInf;
      d.gpus.reserve(r.count);
      for (unsigned k2 = 0; k2 < r.count; ++k2) {
        const unsigned i = possible[k2];
        d.gpus.push_back(i);
        if (!reserves || holds[i].by >= 0) continue;
        if (policy == PolicyKind::kDefault && c.timed && !start_known && (verdicts[i].wait == Wait::kNow || Idle(gpus[i]))) {
          // Bounded: an idle GPU waits for an unknown start at most max_reserve_idle_s (sched/reserve_idle.h).
          const double since = IdleHoldSince(limits, r, gpus[i]);
          d.idle_hold_since_s = UserIdleClock(limits, r);
          const double until = since + limits.max_reserve_idle_s;
          if (c.now >= until) {
            if (c.explain)
              d.notes.push_back(StrCat("GPU", i, ": free, but no longer held for this job: its other GPUs' end is unknown and a free GPU is held at most ",
                                       FormatSeconds(limits.max_reserve_idle_s), " (sched.max_reserve_idle)"));
            continue;
          }
          d.recheck_at_s = d.recheck_at_s ? std::min(*d.recheck_at_s, until) : until;
        }
        holds[i] = Hold{static_cast<int>(d.position - 1), start_known ? start : kInf, end};
      }
    }
    emit(std::move(d));
  }
  return out;
}

std::string ImpossibleReason(const Request& r, const Decision& d, unsigned gpu_count) {
  if (!r.mig_profile.empty())
    return StrCat("asked for a MIG device of profile ", r.mig_profile, " but none here can ever qualify: ",
                  d.never.empty() ? std::string("none matches") : Join(d.never, "; "),
                  " (gpulane status lists the MIG devices)");
  const bool memory = r.mem_bytes.has_value();
  return StrCat("asked for ", Plural(r.count, "GPU"), memory ? StrCat(" with ", FormatBytes(*r.mem_bytes), " each") : "",
                " but only ", d.possible, " of the ", Plural(gpu_count, "GPU"), " here can ever qualify",
                d.never.empty() ? std::string() : StrCat(" (", Join(d.never, "; "), ")"), ": ask for fewer",
                memory ? " or less memory" : "", r.min_free_bytes ? " or a smaller --min-free" : "");
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
