// sched/unclaimed.h and sched/reserve_idle.h: no holder keeps what it does not use. A ticket granted
// and never claimed loses its place after sched.max_unclaimed in each decider's order; a user's
// hold of idle GPUs for an unknown start is bounded by sched.max_reserve_idle over the whole
// reservation and across her resubmissions.
#include <gtest/gtest.h>

#include <random>

#include "sched/policy.h"
#include "sched/reserve_idle.h"
#include "sched/unclaimed.h"
#include "support/idle_gpus.h"
#include "support/units.h"

namespace gpulane::sched {
namespace {

using test::IdleGpus;

Request Job(std::uint32_t uid, unsigned count, double submit = 0) {
  Request r;
  r.uid = uid;
  r.user = uid == 1 ? "alice" : "bob";
  r.count = count;
  r.submit_time_s = submit;
  return r;
}

Limits At(double now) {
  Limits l;
  l.now_s = now;
  return l;
}

// The decision of `line` (keys) as one decider makes it at `now` (lease::DecideLine's steps).
std::vector<Decision> Decide(LineMemory& m, const std::vector<GpuState>& gpus, const std::vector<Request>& line,
                             const std::vector<ClaimKey>& keys, double now, std::optional<std::size_t> self,
                             double bound = 30) {
  auto once = [&] {
    const std::vector<std::size_t> order = ClaimOrder(m, keys);
    std::vector<Request> ordered;
    for (std::size_t i : order) ordered.push_back(m.demoted.count(keys[i]) ? Demoted(line[i]) : line[i]);
    std::vector<Decision> d = Schedule(gpus, ordered, At(now));
    std::vector<Decision> out(line.size());
    for (std::size_t k = 0; k < order.size(); ++k) out[order[k]] = d[k];
    return out;
  };
  auto granted = [](const std::vector<Decision>& d) {
    std::vector<bool> g;
    for (const auto& x : d) g.push_back(x.granted);
    return g;
  };
  std::vector<Decision> d = once();
  if (!NoteGrants(m, keys, granted(d), self, now, bound).newly_demoted.empty()) {
    d = once();
    NoteGrants(m, keys, granted(d), self, now, bound);
  }
  return d;
}

TEST(Unclaimed, AGrantNotClaimedWithinTheBoundLosesItsPlaceToTheRequestBehindIt) {
  // Alice's ticket for both GPUs is first and granted; her gpulane is stopped and never claims.
  const auto gpus = IdleGpus(2, 80 * kGiB, /*free_since_s=*/0);
  const std::vector<Request> line = {Job(1, 2), Job(2, 1)};
  const std::vector<ClaimKey> keys = {{1, 100}, {1, 200}};
  LineMemory bobs;
  auto d = Decide(bobs, gpus, line, keys, 1000, /*self=*/1);
  EXPECT_TRUE(d[0].granted);
  EXPECT_FALSE(d[1].granted) << "within the bound, the line's order holds";
  d = Decide(bobs, gpus, line, keys, 1029.9, 1);
  EXPECT_FALSE(d[1].granted);
  d = Decide(bobs, gpus, line, keys, 1030, 1);
  EXPECT_TRUE(d[1].granted) << "30 s after bob's first sight of alice's unclaimed grant, he goes first";
  EXPECT_FALSE(d[0].granted) << "alice's ticket is decided after his";
  EXPECT_TRUE(bobs.demoted.count(keys[0]));
  // Alice's own decision never demotes her own ticket.
  LineMemory alices;
  EXPECT_TRUE(Decide(alices, gpus, line, keys, 1000, 0)[0].granted);
  EXPECT_TRUE(Decide(alices, gpus, line, keys, 5000, 0)[0].granted);
  EXPECT_TRUE(alices.demoted.empty());
}

TEST(Unclaimed, ALostPlaceIsKeptWhileTheTicketLivesAndForgottenWithIt) {
  LineMemory m;
  const std::vector<ClaimKey> keys = {{1, 1}, {1, 2}};
  NoteGrants(m, keys, {true, false}, 1, 0, 30);
  NoteGrants(m, keys, {true, false}, 1, 30, 30);
  ASSERT_TRUE(m.demoted.count(keys[0]));
  NoteGrants(m, keys, {false, true}, 1, 40, 30);
  EXPECT_TRUE(m.demoted.count(keys[0])) << "demoted for as long as its ticket lives";
  EXPECT_EQ(ClaimOrder(m, keys), (std::vector<std::size_t>{1, 0}));
  const std::vector<ClaimKey> only_second = {keys[1]};
  NoteGrants(m, only_second, {false}, 0, 50, 30);
  EXPECT_TRUE(m.demoted.empty()) << "its ticket is gone";
  // A grant that ends (its GPUs went elsewhere) starts from zero.
  NoteGrants(m, keys, {true, false}, 1, 100, 30);
  NoteGrants(m, keys, {false, false}, 1, 120, 30);
  auto notes = NoteGrants(m, keys, {true, false}, 1, 140, 30);
  EXPECT_TRUE(notes.newly_demoted.empty());
  ASSERT_TRUE(notes.recheck_at_s);
  EXPECT_EQ(*notes.recheck_at_s, 170);
}

TEST(Unclaimed, ADemotedTicketPreemptsNobody) {
  // GPU0 held by a preemptible job; alice's ticket for it waits and names it to give way. Once it
  // lost its place (granted and unclaimed before), the same decision preempts nobody.
  auto gpus = IdleGpus(1, 80 * kGiB, /*free_since_s=*/0);
  gpus[0].free_since_s.reset();
  gpus[0].has_context = true;
  gpus[0].exclusive_holder = "bob (job 7)";
  gpus[0].preemptible_holder = "bob (job 7)";
  const std::vector<Request> line = {Job(1, 1)};
  EXPECT_EQ(Schedule(gpus, line, At(0))[0].preempt, std::vector<unsigned>{0});
  EXPECT_TRUE(Schedule(gpus, {Demoted(line[0])}, At(0))[0].preempt.empty());
}

// Property: whatever the grants of a line look like over time, a decider never demotes its own
// ticket, a ticket it saw granted without a break for the bound is after every ticket it did not
// demote, and one it saw granted for less is not demoted.
TEST(Unclaimed, PropertyOnlyGrantsUnclaimedForTheBoundLoseTheirPlace) {
  std::mt19937 rng(2023);
  for (int round = 0; round < 500; ++round) {
    const std::size_t n = 1 + rng() % 6;
    std::vector<ClaimKey> keys;
    for (std::size_t i = 0; i < n; ++i) keys.push_back({1, 1000 * round + i});
    const std::size_t self = rng() % n;
    LineMemory m;
    std::vector<double> granted_since(n, -1);
    double now = 0;
    for (int step = 0; step < 40; ++step) {
      now += (rng() % 20) * 1.0;
      std::vector<bool> granted(n);
      for (std::size_t i = 0; i < n; ++i) granted[i] = rng() % 4 != 0;
      const std::set<ClaimKey> before = m.demoted;
      NoteGrants(m, keys, granted, self, now, 30);
      for (std::size_t i = 0; i < n; ++i) {
        if (!before.count(keys[i])) granted_since[i] = granted[i] ? (granted_since[i] < 0 ? now : granted_since[i]) : -1;
        EXPECT_FALSE(i == self && m.demoted.count(keys[i]));
        if (before.count(keys[i])) EXPECT_TRUE(m.demoted.count(keys[i])) << "kept while it lives";
        else if (i != self && granted_since[i] >= 0)
          EXPECT_EQ(m.demoted.count(keys[i]) > 0, now - granted_since[i] >= 30) << "round " << round << " step " << step;
      }
      const std::vector<std::size_t> order = ClaimOrder(m, keys);
      bool seen_demoted = false;
      for (std::size_t i : order) {
        if (m.demoted.count(keys[i])) seen_demoted = true;
        else EXPECT_FALSE(seen_demoted) << "a demoted ticket before one that is not";
      }
    }
  }
}

// ---- max_reserve_idle over the whole reservation and across resubmissions -------------------------

TEST(ReserveIdle, AnIdleGpuTheWaitingRequestCannotUseNowIsHeldAtMostTheBound) {
  // Alice asks for 2 GPUs with --min-free above what is free now (the driver's own use), so
  // neither GPU is hers now and her start is unknown. Before, GPU1 was held for ever.
  auto gpus = IdleGpus(2, 80 * kGiB, /*free_since_s=*/0);
  for (auto& g : gpus) g.free_bytes = 70 * kGiB;
  Request alice = Job(1, 2, 0);
  alice.min_free_bytes = 75 * kGiB;
  const std::vector<Request> line = {alice, Job(2, 1, 5)};
  Limits limits = At(59);
  limits.max_reserve_idle_s = 60;
  EXPECT_FALSE(Schedule(gpus, line, limits)[1].granted) << "held for her within the bound";
  limits.now_s = 60;
  const auto d = Schedule(gpus, line, limits);
  EXPECT_TRUE(d[1].granted) << "the bound applies to every idle GPU of her reservation";
  ASSERT_TRUE(d[0].idle_hold_since_s);
  EXPECT_EQ(*d[0].idle_hold_since_s, 0);
}

TEST(ReserveIdle, PropertyAResubmissionDoesNotRestartTheBound) {
  // GPU0 leased with no end (her start is unknown), GPU1 idle. Alice's 2-GPU request is cancelled
  // and resubmitted at random times; bob's 1-GPU request waits behind it. Bob, deciding every
  // second with his memory, gets GPU1 within the bound of his first look, whatever she does.
  std::mt19937 rng(187);
  for (int round = 0; round < 200; ++round) {
    auto gpus = IdleGpus(2, 80 * kGiB, /*free_since_s=*/0);
    gpus[0].free_since_s.reset();
    gpus[0].has_context = true;
    gpus[0].exclusive_holder = "carol (job 1)";
    const double bound = 60;
    LineMemory bobs;
    double alice_submit = 0;
    std::optional<double> bob_started;
    for (double now = 0; now <= 400 && !bob_started; now += 1) {
      if (rng() % 20 == 0) alice_submit = now;  // cancelled and submitted again
      std::vector<Request> line = {Job(1, 2, alice_submit), Job(2, 1, 0)};
      Limits limits = At(now);
      limits.max_reserve_idle_s = bound;
      limits.idle_hold_since_by_uid = IdleHoldClocks(bobs);
      const auto d = Schedule(gpus, line, limits);
      NoteIdleHolds(bobs, {1, 2}, d, now, bound);
      if (d[1].granted) bob_started = now;
    }
    ASSERT_TRUE(bob_started) << "round " << round;
    EXPECT_LE(*bob_started, bound) << "round " << round;
  }
}

}  // namespace
}  // namespace gpulane::sched
