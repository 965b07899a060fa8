#include "sched/policy.h"

#include "sched/gpu_verdict.h"
#include "sched/preemption.h"
#include "sched/reserve_idle.h"
#include "sched/user_limits.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/strings.h"
#include "util/units.h"

namespace gpulane::sched {

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

// In detail:: with the per-GPU rules it uses (gpu_verdict.h), so that no name of theirs is pulled
// into sched:: (the core library is compiled in batches: a using-directive would reach the files
// after this one).
namespace detail {
namespace {

// One decision over the line (Schedule): the GPUs' working copy, the reservations made so far and
// the decisions written, request after request. Each step below is one rule of the header.
class Scheduler {
 public:
  Scheduler(std::vector<GpuState> gpus, std::span<const Request> line, const Limits& limits,
            std::span<const MigUnit> mig_units);
  std::vector<Decision> Run();
  // Run, then each of `behind` in turn as if it joined the line last (GrantsBehindLine).
  std::vector<Decision> RunThenBehind(std::span<const Request> behind);

 private:
  void DecideLine();
  // After DecideLine: `r`'s grant were it to join the line last; not granted, it changes nothing.
  Decision TryBehind(const Request& r);
  // grants_only's early look at a request: whether it is judged, deferred, or nothing later can start.
  enum class Room { kJudge, kDefer, kNoneLeft };
  bool Linked(unsigned a, unsigned b) const;
  std::function<bool(unsigned, unsigned)> LinkedFn() const {
    return [this](unsigned a, unsigned b) { return Linked(a, b); };
  }
  // Whether a request that waits changes anything for those behind it (a reservation, fifo's block).
  bool WaitingMatters() const;
  void DeferWait();
  void Emit(Decision&& d);
  // Its user's limits.max_gpus: over it, it waits and reserves nothing (it cannot start, so it
  // must not keep GPUs from anyone). True when `r` is decided so.
  bool OverUserLimit(const Request& r);
  // A MIG device: decided apart (its GPU takes no whole-GPU request), and it blocks nobody.
  void DecideMigRequest(const Request& r);
  Room RoomFor(const Request& r);
  // grants_only, after CountOpen: how many GPUs `r` could start on at most (an upper bound).
  unsigned RoomOf(const Request& r) const;
  void CountOpen();
  void JudgeAll(const Request& r);
  bool Grant(const Request& r);
  // It could start if preemptible jobs gave way: it reserves those GPUs and names them.
  bool ReserveForPreemption(const Request& r);
  void DecideWait(const Request& r);
  void Reserve(const Request& r, Decision& d);
  void HoldGpu(const Request& r, Decision& d, unsigned i, bool start_known, double start, double end);

  std::vector<GpuState> gpus_;
  std::span<const Request> line_;
  const Limits& limits_;
  std::span<const MigUnit> mig_units_;
  std::vector<bool> mig_taken_;
  unsigned n_;
  std::vector<int> wanted_;
  Context c_;
  std::vector<Hold> holds_;
  std::vector<Decision> out_;
  unsigned waiting_ = 0;
  // grants_only: waiters with nothing to say are only counted, and written out (position alone)
  // when a decision after them is; those after the last such decision are left out.
  unsigned deferred_ = 0, first_deferred_ = 0;  // how many, and the position of the first
  bool fifo_blocked_ = false;   // kFifo: an earlier request waits, so nothing starts
  bool easy_reserved_ = false;  // kEasy: the first waiter has reserved
  std::vector<Verdict> verdicts_;
  std::vector<unsigned> free_now_, backfill_now_, possible_;
  bool changed_ = true;           // grants_only: GPUs or reservations changed since `open_` was counted
  unsigned open_ = 0;             // grants_only: GPUs a later request could still start on
  unsigned open_whole_ = 0;       // grants_only: of those, free and not reserved
  std::vector<double> windows_;   // grants_only: free reserved ones, when their reservations start
  std::map<std::uint32_t, unsigned> in_use_by_uid_;
};

Scheduler::Scheduler(std::vector<GpuState> gpus, std::span<const Request> line, const Limits& limits,
                     std::span<const MigUnit> mig_units)
    : gpus_(std::move(gpus)),
      line_(line),
      limits_(limits),
      mig_units_(mig_units),
      mig_taken_(mig_units.size(), false),
      n_(static_cast<unsigned>(gpus_.size())),
      c_{limits},
      holds_(n_),
      verdicts_(n_) {
  for (unsigned i = 0; i < n_; ++i) gpus_[i].index = i;
  c_.timed = limits.now_s.has_value();
  c_.now = limits.now_s.value_or(0);
  c_.explain = !limits.grants_only;
  c_.backfills = c_.timed && (limits.policy == PolicyKind::kDefault || limits.policy == PolicyKind::kEasy);
  wanted_ = WantedByWaiters(gpus_, line, limits, mig_units);
  if (!wanted_.empty()) c_.wanted = &wanted_;
  c_.line = line;
  if (!limits.grants_only) out_.reserve(line.size());
  if (!limits.max_gpus_by_uid.empty()) in_use_by_uid_ = limits.gpus_in_use_by_uid;
}

bool Scheduler::Linked(unsigned a, unsigned b) const {
  const auto& peers = gpus_[a].nvlink_peers;
  return std::find(peers.begin(), peers.end(), b) != peers.end();
}

bool Scheduler::WaitingMatters() const {
  const PolicyKind policy = limits_.policy;
  return policy == PolicyKind::kDefault || policy == PolicyKind::kFifo || (policy == PolicyKind::kEasy && !easy_reserved_);
}

void Scheduler::DeferWait() {
  if (deferred_++ == 0) first_deferred_ = waiting_ + 1;
  ++waiting_;
}

void Scheduler::Emit(Decision&& d) {
  for (unsigned i = 0; i < deferred_; ++i) out_.emplace_back().position = first_deferred_ + i;
  deferred_ = 0;
  out_.push_back(std::move(d));
}

std::vector<Decision> Scheduler::Run() {
  DecideLine();
  return std::move(out_);
}

std::vector<Decision> Scheduler::RunThenBehind(std::span<const Request> behind) {
  DecideLine();
  std::vector<Decision> out;
  out.reserve(behind.size());
  for (const Request& r : behind) out.push_back(TryBehind(r));
  return out;
}

Decision Scheduler::TryBehind(const Request& r) {
  // A preemptible or MIG request, or one over its user's limit, is never granted here (it would
  // take reserved GPUs, is decided apart, or waits).
  if (IsPreemptible(r) || !r.mig_profile.empty() || r.count == 0) return {};
  if (auto cap = limits_.max_gpus_by_uid.find(r.uid); cap != limits_.max_gpus_by_uid.end() &&
      GpuLimitReason(LimitsConfig{cap->second, {}, {}, {}}, r.user, in_use_by_uid_[r.uid], r.count))
    return {};
  if (limits_.grants_only) {
    if (changed_) CountOpen();
    if (r.count > RoomOf(r)) return {};  // too few GPUs left that it could start on
  }
  JudgeAll(r);
  if (!Grant(r)) return {};
  Decision d = std::move(out_.back());
  out_.pop_back();
  return d;
}

void Scheduler::DecideLine() {
  for (std::size_t k = 0; k < line_.size(); ++k) {
    const Request& r = line_[k];
    if (OverUserLimit(r)) continue;
    if (!r.mig_profile.empty()) {
      DecideMigRequest(r);
      continue;
    }
    if (limits_.grants_only && k > 0) {
      const Room room = RoomFor(r);
      if (room == Room::kNoneLeft) break;  // nothing later can start: the rest wait, undecided
      if (room == Room::kDefer) {
        DeferWait();
        continue;
      }
    }
    JudgeAll(r);
    if (Grant(r) || ReserveForPreemption(r)) continue;
    if (limits_.grants_only && !WaitingMatters()) {
      DeferWait();
      continue;
    }
    DecideWait(r);
  }
}

bool Scheduler::OverUserLimit(const Request& r) {
  auto cap = limits_.max_gpus_by_uid.find(r.uid);
  if (cap == limits_.max_gpus_by_uid.end()) return false;
  const unsigned held = in_use_by_uid_[r.uid];
  auto why = GpuLimitReason(LimitsConfig{cap->second, {}, {}, {}}, r.user, held, r.count);
  if (!why) return false;
  if (limits_.grants_only) {
    DeferWait();
    return true;
  }
  Decision d;
  d.position = ++waiting_;
  d.reasons.push_back(*why);
  Emit(std::move(d));
  return true;
}

void Scheduler::DecideMigRequest(const Request& r) {
  Decision d = DecideMig(c_, mig_units_, mig_taken_, r);
  if (!d.granted) d.position = ++waiting_;
  else if (!limits_.max_gpus_by_uid.empty()) in_use_by_uid_[r.uid] += 1;
  Emit(std::move(d));
}

void Scheduler::CountOpen() {
  open_ = 0;
  open_whole_ = 0;
  windows_.clear();
  for (unsigned i = 0; !fifo_blocked_ && i < n_; ++i) {
    if (!Open(c_, gpus_[i], holds_[i])) continue;
    ++open_;
    if (gpus_[i].shared_leases > 0) continue;
    if (holds_[i].by < 0) ++open_whole_;
    else windows_.push_back(holds_[i].start_s);
  }
  changed_ = false;
}

Scheduler::Room Scheduler::RoomFor(const Request& r) {
  if (changed_) CountOpen();  // a grant or a reservation since the last count
  if (open_ == 0) return Room::kNoneLeft;
  // Too few GPUs left for it, and waiting changes nothing for the requests behind it.
  return r.count > RoomOf(r) && !WaitingMatters() ? Room::kDefer : Room::kJudge;
}

unsigned Scheduler::RoomOf(const Request& r) const {
  if (r.mem_bytes) return open_;
  unsigned room = open_whole_;
  for (double start : windows_) room += r.time_limit_s && c_.now + *r.time_limit_s <= start ? 1 : 0;
  return room;
}

void Scheduler::JudgeAll(const Request& r) {
  free_now_.clear();
  backfill_now_.clear();
  possible_.clear();
  for (unsigned i = 0; i < n_; ++i) {
    Verdict& v = verdicts_[i];
    v = Judge(c_, gpus_[i], r, holds_);
    if (fifo_blocked_ && v.wait == Wait::kNow && !IsPreemptible(r))
      v = Make(c_, Wait::kLease, c_.now, [] { return std::string("free, but an earlier request waits (fifo: nothing starts ahead of it)"); });
    if (v.wait == Wait::kNow) (v.backfill ? backfill_now_ : free_now_).push_back(i);
    if (v.wait != Wait::kNever) possible_.push_back(i);
  }
}

bool Scheduler::Grant(const Request& r) {
  if (free_now_.size() + backfill_now_.size() < r.count) return false;
  const Order order = EffectiveOrder(r);
  Decision d;
  d.granted = true;
  if (free_now_.size() >= r.count) {
    d.gpus = ChooseLinkedSet(Rank(gpus_, free_now_, order), r.count, LinkedFn());
  } else {
    // Backfill: every unreserved free GPU, then the best reserved ones it ends in time for.
    std::vector<unsigned> ranked = Rank(gpus_, free_now_, order);
    for (unsigned i : Rank(gpus_, backfill_now_, order)) ranked.push_back(i);
    d.gpus = ChooseLinkedSet(ranked, r.count, LinkedFn());
  }
  changed_ = true;
  if (!limits_.max_gpus_by_uid.empty()) in_use_by_uid_[r.uid] += r.count;
  Occupy(c_, gpus_, r, d.gpus);
  Emit(std::move(d));
  return true;
}

bool Scheduler::ReserveForPreemption(const Request& r) {
  if (IsPreemptible(r) ||
      std::none_of(gpus_.begin(), gpus_.end(), [](const GpuState& g) { return g.preemptible_holder.has_value(); }))
    return false;
  std::vector<unsigned> chosen = PreemptionSet(c_, gpus_, r, holds_, free_now_, LinkedFn());
  if (chosen.empty()) return false;
  changed_ = true;
  Decision d;
  d.position = ++waiting_;
  d.possible = static_cast<unsigned>(possible_.size());
  const double end = c_.timed && r.time_limit_s ? c_.now + *r.time_limit_s : kInf;
  for (unsigned i : chosen) {
    if (gpus_[i].preemptible_holder) {
      d.preempt.push_back(i);
      if (c_.explain) d.reasons.push_back(StrCat("GPU", i, ": preempting ", *gpus_[i].preemptible_holder, ", a preemptible job"));
    }
    holds_[i] = Hold{static_cast<int>(d.position - 1), c_.now, end, true, &r};
  }
  d.held = chosen;
  d.gpus = std::move(chosen);
  if (c_.timed) d.start_s = c_.now;
  if (limits_.policy == PolicyKind::kEasy) easy_reserved_ = true;
  if (limits_.policy == PolicyKind::kFifo) fifo_blocked_ = true;
  Emit(std::move(d));
  return true;
}

void Scheduler::DecideWait(const Request& r) {
  Decision d;
  d.position = ++waiting_;
  d.possible = static_cast<unsigned>(possible_.size());
  d.impossible = possible_.size() < r.count;
  if (c_.explain) {
    for (unsigned i = 0; i < n_; ++i) {
      if (verdicts_[i].wait == Wait::kNow) continue;
      d.reasons.push_back(StrCat("GPU", i, ": ", verdicts_[i].reason));
      if (verdicts_[i].wait == Wait::kNever) d.never.push_back(d.reasons.back());
    }
  }
  if (!d.impossible) Reserve(r, d);
  Emit(std::move(d));
}

// Waits for the GPUs it could use soonest: by when they are expected usable, then free now,
// leased, held by outsiders; reserves them unless its policy or its being preemptible says not.
void Scheduler::Reserve(const Request& r, Decision& d) {
  changed_ = true;
  StableSort(possible_, possible_.size(), [&](unsigned a, unsigned b) {
    if (verdicts_[a].ready_s != verdicts_[b].ready_s) return verdicts_[a].ready_s < verdicts_[b].ready_s;
    return verdicts_[a].wait < verdicts_[b].wait;
  });
  // A preemptible request blocks nobody: it reserves nothing.
  const PolicyKind policy = limits_.policy;
  const bool preemptible = IsPreemptible(r);
  const bool reserves = !preemptible && (policy == PolicyKind::kDefault || policy == PolicyKind::kFifo ||
                                         (policy == PolicyKind::kEasy && !easy_reserved_));
  if (policy == PolicyKind::kEasy && !preemptible) easy_reserved_ = true;
  if (policy == PolicyKind::kFifo && !preemptible) fifo_blocked_ = true;
  double start = c_.now;
  for (unsigned k = 0; k < r.count; ++k) start = std::max(start, verdicts_[possible_[k]].ready_s);
  const bool start_known = c_.timed && std::isfinite(start);
  if (start_known) {
    d.start_s = start;
    // Of the GPUs usable by then, reserve the busy ones first: a GPU free now that it does not
    // need stays free for anyone (EASY's extra nodes).
    std::size_t usable = r.count;
    while (usable < possible_.size() && verdicts_[possible_[usable]].ready_s <= start) ++usable;
    StableSort(possible_, usable, [&](unsigned a, unsigned b) { return verdicts_[a].ready_s > verdicts_[b].ready_s; });
  }
  const double end = start_known && r.time_limit_s ? start + *r.time_limit_s : kInf;
  d.gpus.reserve(r.count);
  for (unsigned k = 0; k < r.count; ++k) {
    const unsigned i = possible_[k];
    d.gpus.push_back(i);
    if (reserves && holds_[i].by < 0) HoldGpu(r, d, i, start_known, start, end);
  }
}

// Reserves GPU `i` for waiter `d`. Bounded: under kDefault an idle GPU waits for an unknown start
// at most max_reserve_idle_s (sched/reserve_idle.h); past that it is not held (a note says so).
void Scheduler::HoldGpu(const Request& r, Decision& d, unsigned i, bool start_known, double start, double end) {
  if (limits_.policy == PolicyKind::kDefault && c_.timed && !start_known && (verdicts_[i].wait == Wait::kNow || Idle(gpus_[i]))) {
    const double since = IdleHoldSince(limits_, r, gpus_[i]);
    d.idle_hold_since_s = UserIdleClock(limits_, r);
    const double until = since + limits_.max_reserve_idle_s;
    if (c_.now >= until) {
      if (c_.explain)
        d.notes.push_back(StrCat("GPU", i, ": free, but no longer held for this job: its other GPUs' end is unknown and a free GPU is held at most ",
                                 FormatSeconds(limits_.max_reserve_idle_s), " (sched.max_reserve_idle)"));
      return;
    }
    d.recheck_at_s = d.recheck_at_s ? std::min(*d.recheck_at_s, until) : until;
  }
  holds_[i] = Hold{static_cast<int>(d.position - 1), start_known ? start : kInf, end, false, &r};
  d.held.push_back(i);
}

}  // namespace
}  // namespace detail

std::vector<Decision> Schedule(std::vector<GpuState> gpus, std::span<const Request> line, const Limits& limits,
                               std::span<const MigUnit> mig_units) {
  return detail::Scheduler(std::move(gpus), line, limits, mig_units).Run();
}

std::vector<Decision> GrantsBehindLine(std::vector<GpuState> gpus, std::span<const Request> line, std::span<const Request> behind,
                                       const Limits& limits, std::span<const MigUnit> mig_units) {
  return detail::Scheduler(std::move(gpus), line, limits, mig_units).RunThenBehind(behind);
}

std::string ImpossibleReason(const Request& r, const Decision& d, unsigned gpu_count) {
  if (!r.mig_profile.empty())
    return StrCat("asked for a MIG device of profile ", r.mig_profile, " but none here can ever qualify: ",
                  d.never.empty() ? std::string("none matches") : Join(d.never, "; "),
                  " (gpulane status lists the MIG devices)");
  const bool memory = r.mem_bytes.has_value();
  // Less memory or a smaller minimum helps only where a GPU was ruled out, not where fewer exist.
  const bool ruled_out = !d.never.empty();
  return StrCat("asked for ", detail::Plural(r.count, "GPU"), memory ? StrCat(" with ", FormatBytes(*r.mem_bytes), " each") : "",
                " but only ", d.possible, " of the ", detail::Plural(gpu_count, "GPU"), " here can ever qualify",
                ruled_out ? StrCat(" (", Join(d.never, "; "), ")") : std::string(), ": ask for fewer",
                memory && ruled_out ? " or less memory" : "", r.min_free_bytes && ruled_out ? " or a smaller --min-free" : "");
}

Result<std::vector<unsigned>> GrantedNow(const Request& r, const Decision& d, unsigned gpu_count) {
  if (d.granted) return d.gpus;
  if (d.impossible) return MakeError(ErrorKind::kInvalidArgument, ImpossibleReason(r, d, gpu_count));
  const unsigned qualify = gpu_count - static_cast<unsigned>(d.reasons.size());
  return MakeError(ErrorKind::kNotEnoughGpus,
                   StrCat("too few GPUs free now: ", qualify, " of ", detail::Plural(r.count, "requested GPU"), " qualify (",
                          Join(d.reasons, "; "), "); 'gpulane run' without --no-wait waits for them"));
}

}  // namespace gpulane::sched
