#pragma once
// Whether one GPU can serve one request now, and if not when (the per-GPU rules of the lease
// policy, sched/policy.h), and what a decision does to its working copy of the GPUs: the parts of
// Schedule's decision loop (policy.cc). Internal to sched/: nothing outside it includes this.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sched/policy.h"

namespace gpulane::sched::detail {

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
  const Request* request = nullptr;  // whose reservation (for its user's name, for people)
};

inline bool IsPreemptible(const Request& r) { return r.preemptible != Preemptible::kNo; }

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

/// "1 GPU", "3 GPUs".
std::string Plural(unsigned n, const char* word);

/// Whether `g` could serve `r` now, or when and why not, given the reservations `holds` (by GPU).
Verdict Judge(const Context& c, const GpuState& g, const Request& r, const std::vector<Hold>& holds);

/// Whether a later request could still start on `g` (grants_only's early end). False only when no
/// request could: Judge would answer something other than kNow for every one.
bool Open(const Context& c, const GpuState& g, const Hold& h);

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


/// `indices` (GPUs that qualify for the request now) best first in `order` (request.h Order).
std::vector<unsigned> Rank(const std::vector<GpuState>& gpus, std::vector<unsigned> indices, Order order);

/// Applies a grant to the working copy of the GPUs, so later requests see it.
void Occupy(const Context& c, std::vector<GpuState>& gpus, const Request& r, const std::vector<unsigned>& chosen);

/// For a request that is not preemptible and cannot start now: the GPUs it would take if the
/// preemptible jobs on some gave way (free ones first, then the fewest preemptible ones in the
/// request's order), or nothing when even that is not enough.
std::vector<unsigned> PreemptionSet(const Context& c, const std::vector<GpuState>& gpus, const Request& r,
                                    const std::vector<Hold>& holds, const std::vector<unsigned>& free_now,
                                    const std::function<bool(unsigned, unsigned)>& linked);

/// The decision for a request of a MIG profile (Request::mig_profile) over `units`; `taken` marks
/// those granted earlier in this decision.
Decision DecideMig(const Context& c, std::span<const MigUnit> units, std::vector<bool>& taken, const Request& r);

}  // namespace gpulane::sched::detail
