// The scheduling policies of sched::Schedule (fifo, firstfit, easy, default) on a virtual clock:
// what each lets start ahead of a waiting request, backfill against known lease ends, the bound
// on holding a free GPU for an unknown start, and that grants_only grants exactly what the full
// decision grants.
#include <gtest/gtest.h>

#include <array>
#include <random>

#include "sched/policy.h"
#include "support/idle_gpus.h"
#include "support/units.h"

namespace gpulane::sched {
namespace {

using test::IdleGpus;

// GPU `i` leased by a job that ends at `until` (nullopt: no time limit).
void Lease(std::vector<GpuState>& gpus, unsigned i, std::optional<double> until) {
  gpus[i].has_context = true;
  gpus[i].exclusive_holder = "bob (job 1)";
  gpus[i].busy_until_s = until;
}

Request Job(unsigned count, std::optional<double> limit = std::nullopt, double submit = 0) {
  Request r;
  r.count = count;
  r.time_limit_s = limit;
  r.submit_time_s = submit;
  r.user = "alice";
  return r;
}

Limits At(PolicyKind policy, double now) {
  Limits l;
  l.policy = policy;
  l.now_s = now;
  return l;
}

// ---- fifo, firstfit, default: who may start ahead of a waiter ----------------------------------

TEST(Policies, FifoStartsNothingAheadOfAWaitingRequest) {
  auto gpus = IdleGpus(3);
  Lease(gpus, 0, 100.0);
  Lease(gpus, 1, 100.0);
  // The head starts at t=100 on GPU0 and GPU1, so it reserves those and leaves GPU2 free.
  const std::vector<Request> line = {Job(2, 1000), Job(1)};
  auto fifo = Schedule(gpus, line, At(PolicyKind::kFifo, 0));
  EXPECT_FALSE(fifo[0].granted);
  EXPECT_FALSE(fifo[1].granted) << "fifo: nothing starts ahead of an earlier waiting request";
  EXPECT_NE(fifo[1].reasons.end(), std::find_if(fifo[1].reasons.begin(), fifo[1].reasons.end(), [](const std::string& r) {
              return r.find("fifo") != std::string::npos;
            }));
  for (PolicyKind p : {PolicyKind::kDefault, PolicyKind::kEasy, PolicyKind::kFirstFit}) {
    auto d = Schedule(gpus, line, At(p, 0));
    EXPECT_TRUE(d[1].granted) << PolicyName(p) << ": a GPU the head does not need at its start is for anyone";
    EXPECT_EQ(d[1].gpus, std::vector<unsigned>{2}) << PolicyName(p);
  }
  auto d = Schedule(gpus, line, At(PolicyKind::kDefault, 0));
  EXPECT_EQ(d[0].gpus, (std::vector<unsigned>{0, 1}));
}

TEST(Policies, FirstFitSkipsAheadWithoutReservations) {
  auto gpus = IdleGpus(2);
  Lease(gpus, 0, std::nullopt);
  const std::vector<Request> line = {Job(2), Job(1)};
  auto ff = Schedule(gpus, line, At(PolicyKind::kFirstFit, 0));
  EXPECT_FALSE(ff[0].granted);
  EXPECT_TRUE(ff[1].granted) << "firstfit takes the GPU the first request waits for";
  EXPECT_EQ(ff[1].gpus, std::vector<unsigned>{1});
  for (PolicyKind p : {PolicyKind::kFifo, PolicyKind::kEasy, PolicyKind::kDefault})
    EXPECT_FALSE(Schedule(gpus, line, At(p, 0))[1].granted) << PolicyName(p);
  EXPECT_FALSE(Schedule(gpus, line, Limits{})[1].granted) << "without a clock: today's reservation";
}

// ---- easy: backfill against known ends ----------------------------------------------------------

TEST(Policies, EasyBackfillsAJobThatEndsBeforeTheReservationAndRefusesOneThatDoesNot) {
  auto gpus = IdleGpus(2);
  Lease(gpus, 0, 100.0);  // GPU0 is free at t=100
  const Limits easy = At(PolicyKind::kEasy, 10);
  auto d = Schedule(gpus, {Job(2, 500), Job(1, 90)}, easy);
  EXPECT_FALSE(d[0].granted);
  ASSERT_TRUE(d[0].start_s.has_value());
  EXPECT_DOUBLE_EQ(*d[0].start_s, 100) << "the head's reservation starts when GPU0's lease ends";
  EXPECT_TRUE(d[1].granted) << "10 + 90 <= 100: it ends before the reservation starts";
  EXPECT_EQ(d[1].gpus, std::vector<unsigned>{1});

  d = Schedule(gpus, {Job(2, 500), Job(1, 91)}, easy);
  EXPECT_FALSE(d[1].granted) << "10 + 91 > 100 would delay the head";
  d = Schedule(gpus, {Job(2, 500), Job(1)}, easy);
  EXPECT_FALSE(d[1].granted) << "a job without a time limit never starts on a reserved GPU";

  Lease(gpus, 0, std::nullopt);  // the blocker's end is unknown: no backfill at all
  d = Schedule(gpus, {Job(2, 500), Job(1, 1)}, easy);
  EXPECT_FALSE(d[0].start_s.has_value());
  EXPECT_FALSE(d[1].granted) << "easy keeps a reservation with an unknown start, however long";
  EXPECT_FALSE(d[0].recheck_at_s.has_value());
}

TEST(Policies, EasyReservesForTheFirstWaiterOnlyDefaultForEvery) {
  auto gpus = IdleGpus(4);
  Lease(gpus, 0, 100.0);
  Lease(gpus, 1, 100.0);
  // The head takes GPU2 and the two leased ones from t=100; GPU3 stays free. The second waiter
  // wants all four; the third is a short job without a time limit.
  const std::vector<Request> line = {Job(3, 1000), Job(4, 1000), Job(1)};
  auto easy = Schedule(gpus, line, At(PolicyKind::kEasy, 0));
  EXPECT_FALSE(easy[0].granted);
  EXPECT_FALSE(easy[1].granted);
  EXPECT_TRUE(easy[2].granted) << "easy: only the head reserves, so GPU3 is free for anyone";
  EXPECT_EQ(easy[2].gpus, std::vector<unsigned>{3});
  auto dflt = Schedule(gpus, line, At(PolicyKind::kDefault, 0));
  EXPECT_FALSE(dflt[2].granted) << "default: the second waiter reserves GPU3 too (from t=1100)";
  ASSERT_TRUE(dflt[1].start_s.has_value());
  EXPECT_DOUBLE_EQ(*dflt[1].start_s, 1100) << "after the head's reservation ends";
  // A job that ends before the second waiter's reservation starts may still use GPU3.
  EXPECT_TRUE(Schedule(gpus, {Job(3, 1000), Job(4, 1000), Job(1, 1100)}, At(PolicyKind::kDefault, 0))[2].granted);
}

TEST(Policies, BackfillPrefersGpusNobodyReserved) {
  auto gpus = IdleGpus(4);
  Lease(gpus, 0, 100.0);
  Lease(gpus, 1, 100.0);
  // The head reserves GPU0, GPU1 (free at 100) and GPU2; GPU3 is not reserved.
  auto d = Schedule(gpus, {Job(3, 10), Job(1, 50)}, At(PolicyKind::kEasy, 0));
  EXPECT_EQ(d[0].gpus, (std::vector<unsigned>{0, 1, 2}));
  ASSERT_TRUE(d[1].granted);
  EXPECT_EQ(d[1].gpus, std::vector<unsigned>{3});
  d = Schedule(gpus, {Job(3, 10), Job(2, 50)}, At(PolicyKind::kEasy, 0));
  ASSERT_TRUE(d[1].granted) << "GPU3 and the reserved GPU2, ending at 50 <= 100";
  EXPECT_EQ(d[1].gpus, (std::vector<unsigned>{3, 2}));
}

// ---- default: bounded reservations --------------------------------------------------------------

TEST(Policies, DefaultLetsGoOfAFreeGpuHeldForAnUnknownStartAfterMaxReserveIdle) {
  auto gpus = IdleGpus(2);
  Lease(gpus, 0, std::nullopt);  // no time limit: its end is unknown
  gpus[1].free_since_s = 0;
  const std::vector<Request> line = {Job(2, 1000, /*submit=*/0), Job(1, std::nullopt, 5)};
  auto d = Schedule(gpus, line, At(PolicyKind::kDefault, 599));
  EXPECT_FALSE(d[1].granted) << "held for the head for up to 10 minutes";
  ASSERT_TRUE(d[0].recheck_at_s.has_value());
  EXPECT_DOUBLE_EQ(*d[0].recheck_at_s, 600) << "the decision changes by itself at t=600";
  EXPECT_TRUE(d[0].notes.empty());

  d = Schedule(gpus, line, At(PolicyKind::kDefault, 600));
  EXPECT_FALSE(d[0].granted);
  EXPECT_TRUE(d[1].granted) << "after max_reserve_idle the free GPU goes to later jobs, even without a time limit";
  EXPECT_EQ(d[1].gpus, std::vector<unsigned>{1});
  ASSERT_EQ(d[0].notes.size(), 1u);
  EXPECT_NE(d[0].notes[0].find("GPU1: free, but no longer held"), std::string::npos) << d[0].notes[0];

  // Counted from when the GPU became free when that is later than the submission.
  gpus[1].free_since_s = 500;
  EXPECT_FALSE(Schedule(gpus, line, At(PolicyKind::kDefault, 1099))[1].granted);
  EXPECT_TRUE(Schedule(gpus, line, At(PolicyKind::kDefault, 1100))[1].granted);

  // A shorter bound.
  Limits quick = At(PolicyKind::kDefault, 60);
  quick.max_reserve_idle_s = 60;
  gpus[1].free_since_s = 0;
  EXPECT_TRUE(Schedule(gpus, line, quick)[1].granted);

  // A foreign process, too, has an end nobody knows.
  gpus = IdleGpus(2);
  gpus[0].has_context = true;
  gpus[0].foreign = {"bob's python (pid 12)"};
  EXPECT_FALSE(Schedule(gpus, line, At(PolicyKind::kDefault, 599))[1].granted);
  EXPECT_TRUE(Schedule(gpus, line, At(PolicyKind::kDefault, 600))[1].granted);
}

TEST(Policies, DefaultKeepsAReservationWhoseStartIsKnown) {
  auto gpus = IdleGpus(2);
  Lease(gpus, 0, 100000.0);
  gpus[1].free_since_s = 0;
  const std::vector<Request> line = {Job(2, 1000, 0), Job(1, std::nullopt, 5)};
  auto d = Schedule(gpus, line, At(PolicyKind::kDefault, 50000));
  EXPECT_FALSE(d[1].granted) << "the blocker ends at a known time: the reservation holds, however long";
  EXPECT_FALSE(d[0].recheck_at_s.has_value());
  EXPECT_TRUE(Schedule(gpus, {Job(2, 1000, 0), Job(1, 50000, 5)}, At(PolicyKind::kDefault, 50000))[1].granted)
      << "backfill: ends exactly when the reservation starts";
}

TEST(Policies, WithoutAClockDefaultIsTodaysFirstComeFirstServedWithReservations) {
  auto gpus = IdleGpus(2);
  Lease(gpus, 0, 100.0);
  gpus[1].free_since_s = 0;
  auto d = Schedule(gpus, {Job(2, 1000), Job(1, 1)}, Limits{});
  EXPECT_FALSE(d[1].granted) << "no now_s: no backfill";
  EXPECT_FALSE(d[0].start_s.has_value());
  EXPECT_FALSE(d[0].recheck_at_s.has_value());
}

TEST(Policies, NamesRoundTrip) {
  for (PolicyKind p : {PolicyKind::kDefault, PolicyKind::kFifo, PolicyKind::kFirstFit, PolicyKind::kEasy})
    EXPECT_EQ(ParsePolicy(PolicyName(p)), p);
  EXPECT_FALSE(ParsePolicy("sjf").has_value());
}

// ---- grants_only grants what the full decision grants ----------------------------------------

TEST(Policies, GrantsOnlyGrantsExactlyWhatTheFullDecisionGrants) {
  std::mt19937_64 rnd(20261201);
  auto pick = [&](unsigned n) { return static_cast<unsigned>(rnd() % n); };
  for (int round = 0; round < 3000; ++round) {
    const unsigned n = 1 + pick(8);
    const double now = 1000 + pick(2000);
    auto gpus = IdleGpus(n);
    for (unsigned i = 0; i < n; ++i) {
      switch (pick(5)) {
        case 0: Lease(gpus, i, pick(2) ? std::optional<double>(now + pick(3000)) : std::nullopt); break;
        case 1:  // shared by memory-declared leases
          gpus[i].has_context = true;
          gpus[i].shared_leases = 1 + pick(2);
          gpus[i].unallocated_reservation_bytes = (20 + pick(61)) * kGiB;
          if (gpus[i].unallocated_reservation_bytes > 80 * kGiB) gpus[i].unallocated_reservation_bytes = 80 * kGiB;
          if (pick(2)) gpus[i].busy_until_s = now + pick(3000);
          break;
        case 2:
          if (pick(4) == 0) {
            gpus[i].has_context = true;
            gpus[i].foreign = {"x"};
          }
          break;
        default: if (pick(2)) gpus[i].free_since_s = now - pick(1500); break;
      }
    }
    std::vector<Request> line;
    const unsigned length = pick(25);
    for (unsigned k = 0; k < length; ++k) {
      Request r = Job(1 + pick(std::min(n, 4u)), pick(3) ? std::optional<double>(1 + pick(4000)) : std::nullopt,
                      now - pick(1200));
      if (pick(5) == 0) {
        r.count = 1;
        r.mem_bytes = (1 + pick(60)) * kGiB;
      }
      if (pick(4) == 0)  // an explicit --order; else the default (best fit for --mem)
        r.order = std::array{Order::kMostFree, Order::kLeastUtil, Order::kPci, Order::kBestFit}[pick(4)];
      line.push_back(r);
    }
    for (PolicyKind p : {PolicyKind::kDefault, PolicyKind::kFifo, PolicyKind::kFirstFit, PolicyKind::kEasy}) {
      Limits full = At(p, now);
      Limits fast = full;
      fast.grants_only = true;
      const auto a = Schedule(gpus, line, full);
      const auto b = Schedule(gpus, line, fast);
      ASSERT_EQ(a.size(), line.size());
      ASSERT_LE(b.size(), line.size());
      for (std::size_t k = 0; k < line.size(); ++k) {
        const bool fast_granted = k < b.size() && b[k].granted;
        ASSERT_EQ(a[k].granted, fast_granted) << "round " << round << " policy " << PolicyName(p) << " request " << k;
        if (a[k].granted) {
          ASSERT_EQ(a[k].gpus, b[k].gpus);
        }
        if (a[k].recheck_at_s && k < b.size() && !b[k].granted && b[k].recheck_at_s) {
          ASSERT_EQ(*a[k].recheck_at_s, *b[k].recheck_at_s);
        }
      }
    }
  }
}

}  // namespace
}  // namespace gpulane::sched
