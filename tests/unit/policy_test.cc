// The lease policy (sched::Schedule): who gets which GPUs, who waits, and why.
#include "sched/policy.h"
#include "support/idle_gpus.h"
#include "support/units.h"
#include "support/decisions.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace gpulane::sched {
namespace {

using test::IdleGpus;
using test::UuidOf;

using Indices = std::vector<unsigned>;

std::vector<std::string> Uuids(std::initializer_list<unsigned> indices) {
  std::vector<std::string> out;
  for (unsigned i : indices) out.push_back(UuidOf(i));
  return out;
}

// A request for whole GPUs by user `who`, allowed on every GPU of the machine.
Request Whole(std::string who, unsigned count, unsigned gpus_on_machine) {
  Request r;
  r.user = std::move(who);
  r.count = count;
  r.allowed_uuids.emplace();
  for (unsigned i = 0; i < gpus_on_machine; ++i) r.allowed_uuids->push_back(UuidOf(i));
  return r;
}

Request Shared(std::string id, std::uint64_t mem, unsigned gpus_on_machine) {
  Request r = Whole(std::move(id), 1, gpus_on_machine);
  r.mem_bytes = mem;
  return r;
}

bool HasReason(const Decision& d, const std::string& text) {
  return std::any_of(d.reasons.begin(), d.reasons.end(), [&](const std::string& r) { return r == text; });
}

bool AnyReasonStartsWith(const Decision& d, const std::string& prefix) {
  return std::any_of(d.reasons.begin(), d.reasons.end(), [&](const std::string& r) { return r.rfind(prefix, 0) == 0; });
}

// ---- First come, first served -----------------------------------------------------------------

TEST(Schedule, OneDecisionPerRequestInLineOrder) {
  auto gpus = IdleGpus(2);
  std::vector<Request> line = {Whole("a", 1, 2), Whole("b", 2, 2), Whole("c", 1, 2)};
  auto d = Schedule(gpus, line, kNoMargin);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_TRUE(d[0].granted);
  EXPECT_FALSE(d[1].granted) << "b wants both GPUs; a has one";
  EXPECT_FALSE(d[2].granted) << "c may not take the GPU b waits for";
}

TEST(Schedule, FirstInLineGetsTheFreeGpuAndTheRestWaitInOrder) {
  auto gpus = IdleGpus(1);
  std::vector<Request> line = {Whole("a", 1, 1), Whole("b", 1, 1), Whole("c", 1, 1)};
  auto d = Schedule(gpus, line, kNoMargin);
  EXPECT_TRUE(d[0].granted);
  EXPECT_EQ(d[0].gpus, Indices{0});
  EXPECT_FALSE(d[1].granted);
  EXPECT_FALSE(d[2].granted);
  EXPECT_EQ(d[1].position, 1u) << "positions count only the requests that wait";
  EXPECT_EQ(d[2].position, 2u);
  EXPECT_TRUE(AnyReasonStartsWith(d[1], "GPU0: leased by a (earlier in line)")) << ReasonsOf(d[1]);
  EXPECT_FALSE(d[1].impossible);

  // Once "a" is gone the next in line is served, never the last one.
  line.erase(line.begin());
  d = Schedule(gpus, line, kNoMargin);
  EXPECT_TRUE(d[0].granted) << "b";
  EXPECT_FALSE(d[1].granted) << "c";
}

TEST(Schedule, RequestsGrantedTogetherGetDifferentGpus) {
  auto gpus = IdleGpus(4);
  std::vector<Request> line = {Whole("a", 1, 4), Whole("b", 2, 4), Whole("c", 1, 4)};
  auto d = Schedule(gpus, line, kNoMargin);
  std::set<unsigned> seen;
  std::size_t total = 0;
  for (const auto& x : d) {
    ASSERT_TRUE(x.granted);
    total += x.gpus.size();
    seen.insert(x.gpus.begin(), x.gpus.end());
  }
  EXPECT_EQ(total, 4u);
  EXPECT_EQ(seen.size(), 4u) << "no GPU handed out twice";
}

TEST(Schedule, EveryoneWaitsBehindALeaseAndTheFirstWaiterHoldsTheGpu) {
  auto gpus = IdleGpus(1);
  gpus[0].exclusive_holder = "alice (job r4121)";
  std::vector<Request> line = {Whole("a", 1, 1), Whole("b", 1, 1)};
  auto d = Schedule(gpus, line, kNoMargin);
  EXPECT_FALSE(d[0].granted);
  EXPECT_FALSE(d[1].granted);
  EXPECT_EQ(d[0].position, 1u);
  EXPECT_EQ(d[1].position, 2u);
  EXPECT_TRUE(HasReason(d[0], "GPU0: leased by alice (job r4121)")) << ReasonsOf(d[0]);
  EXPECT_EQ(d[0].gpus, Indices{0}) << "the GPU it waits for is reserved for it";
}

// A later request that fits now may start, but only on GPUs that no earlier waiter reserved.
TEST(Schedule, LaterRequestThatFitsTakesOnlyUnreservedGpus) {
  auto gpus = IdleGpus(4);
  gpus[0].exclusive_holder = "alice (job r1)";
  Request big = Whole("big", 2, 4);
  big.allowed_uuids = Uuids({0, 1});  // waits for GPU0; GPU1 is free now and reserved for it
  std::vector<Request> line = {big, Whole("small", 1, 4)};
  auto d = Schedule(gpus, line, kNoMargin);
  EXPECT_FALSE(d[0].granted);
  EXPECT_EQ(std::set<unsigned>(d[0].gpus.begin(), d[0].gpus.end()), (std::set<unsigned>{0, 1}));
  ASSERT_TRUE(d[1].granted) << ReasonsOf(d[1]);
  ASSERT_EQ(d[1].gpus.size(), 1u);
  EXPECT_NE(d[1].gpus[0], 1u) << "GPU1 is reserved for the earlier request";
  EXPECT_NE(d[1].gpus[0], 0u);

  // Only reserved GPUs are left for it: it waits, and says why.
  Request pinned = Whole("pinned", 1, 4);
  pinned.allowed_uuids = Uuids({1});
  d = Schedule(gpus, {big, pinned}, kNoMargin);
  EXPECT_FALSE(d[1].granted);
  EXPECT_TRUE(HasReason(d[1], "GPU1: held for an earlier request, 1st in line (big's)")) << ReasonsOf(d[1]);
  EXPECT_EQ(d[1].position, 2u);

  // Without the earlier waiter, the same request gets GPU1 at once (the reservation is the cause).
  d = Schedule(gpus, {pinned}, kNoMargin);
  EXPECT_TRUE(d[0].granted);
  EXPECT_EQ(d[0].gpus, Indices{1});
}

// A two-GPU request behind one busy GPU is not overtaken by a stream of one-GPU requests: the
// free GPU stays reserved until the busy one is released, and then it gets both.
TEST(Schedule, LargeWaitingRequestIsNotStarvedByAStreamOfSmallOnes) {
  auto gpus = IdleGpus(2);
  std::vector<Request> line = {Whole("big", 2, 2)};
  for (int round = 0; round < 5; ++round) {
    gpus[0].exclusive_holder = "small job " + std::to_string(round);
    line.push_back(Whole("small" + std::to_string(round), 1, 2));
    auto d = Schedule(gpus, line, kNoMargin);
    EXPECT_FALSE(d[0].granted) << "GPU0 is still leased";
    for (std::size_t i = 1; i < d.size(); ++i) {
      EXPECT_FALSE(d[i].granted) << "small request " << i << " would overtake the large request on GPU1";
      EXPECT_TRUE(HasReason(d[i], "GPU1: held for an earlier request, 1st in line (big's)")) << ReasonsOf(d[i]);
    }
  }
  gpus[0].exclusive_holder.reset();
  auto d = Schedule(gpus, line, kNoMargin);
  ASSERT_TRUE(d[0].granted);
  EXPECT_EQ(std::set<unsigned>(d[0].gpus.begin(), d[0].gpus.end()), (std::set<unsigned>{0, 1}));
  for (std::size_t i = 1; i < d.size(); ++i) EXPECT_FALSE(d[i].granted);

  // The same small request alone would have started on the free GPU.
  gpus[0].exclusive_holder = "small job";
  d = Schedule(gpus, {Whole("small", 1, 2)}, kNoMargin);
  EXPECT_TRUE(d[0].granted);
  EXPECT_EQ(d[0].gpus, Indices{1});
}

TEST(Schedule, AWaiterReservesTheGpusItCouldUseSoonestFirst) {
  auto gpus = IdleGpus(3);
  gpus[0].foreign = {"bob's python (pid 12)"};
  gpus[1].exclusive_holder = "alice (job r1)";
  gpus[2].exclusive_holder = "carol (job r2)";
  auto d = Schedule(gpus, {Whole("a", 1, 3)}, kNoMargin);
  ASSERT_FALSE(d[0].granted);
  ASSERT_EQ(d[0].gpus.size(), 1u);
  EXPECT_NE(d[0].gpus[0], 0u) << "a lease ends with its job; a process outside gpulane may never end";
}

// ---- Sharing by declared memory (--mem) -------------------------------------------------------

TEST(Schedule, MemoryRequestsPackWhileDeclaredPlusMarginFitsTheTotal) {
  auto gpus = IdleGpus(1, 10 * kGiB);
  const Limits limits{1 * kGiB};
  std::vector<Request> line;
  for (int i = 0; i < 5; ++i) line.push_back(Shared("m" + std::to_string(i), 3 * kGiB, 1));
  auto d = Schedule(gpus, line, limits);
  // 3 x 3 GiB + 1 GiB margin = 10 GiB: exactly full. A fourth would not fit.
  EXPECT_TRUE(d[0].granted);
  EXPECT_TRUE(d[1].granted);
  EXPECT_TRUE(d[2].granted) << ReasonsOf(d[2]);
  EXPECT_FALSE(d[3].granted);
  EXPECT_FALSE(d[4].granted);
  EXPECT_FALSE(d[3].impossible);
  EXPECT_TRUE(HasReason(d[3], "GPU0: 0 MiB free < 3.0 GiB declared")) << ReasonsOf(d[3]);

  // A larger margin leaves room for one job fewer.
  d = Schedule(gpus, line, Limits{2 * kGiB});
  EXPECT_TRUE(d[1].granted);
  EXPECT_FALSE(d[2].granted);
  EXPECT_TRUE(HasReason(d[2], "GPU0: 2.0 GiB free < 3.0 GiB declared")) << ReasonsOf(d[2]);
}

TEST(Schedule, DeclaredMemoryNotYetAllocatedIsCounted) {
  auto gpus = IdleGpus(1, 80 * kGiB);
  // One shared lease declared 40 GiB and allocated 10 GiB of it so far: NVML shows 70 GiB free,
  // but 30 GiB of that is promised.
  gpus[0].shared_leases = 1;
  gpus[0].free_bytes = 70 * kGiB;
  gpus[0].unallocated_reservation_bytes = 30 * kGiB;
  const Limits limits{1 * kGiB};
  auto d = Schedule(gpus, {Shared("big", 40 * kGiB, 1)}, limits);
  EXPECT_FALSE(d[0].granted);
  EXPECT_TRUE(HasReason(d[0], "GPU0: 39.0 GiB free < 40.0 GiB declared")) << ReasonsOf(d[0]);
  d = Schedule(gpus, {Shared("fits", 39 * kGiB, 1)}, limits);
  EXPECT_TRUE(d[0].granted) << ReasonsOf(d[0]);
}

TEST(Schedule, MemoryUsedOutsideGpulaneLeavesLessRoom) {
  auto gpus = IdleGpus(1, 80 * kGiB);
  gpus[0].foreign = {"bob's python (pid 12)"};
  gpus[0].free_bytes = 30 * kGiB;
  Request r = Shared("m", 30 * kGiB, 1);
  r.share_foreign = true;
  auto d = Schedule(gpus, {r}, Limits{1 * kGiB});
  EXPECT_FALSE(d[0].granted);
  EXPECT_TRUE(HasReason(d[0], "GPU0: 29.0 GiB free < 30.0 GiB declared")) << ReasonsOf(d[0]);
  r.mem_bytes = 29 * kGiB;
  EXPECT_TRUE(Schedule(gpus, {r}, Limits{1 * kGiB})[0].granted);
}

// A GPU shared by `leases` memory-declared leases that declared `declared` in all, none of it allocated yet.
void ShareOut(std::vector<GpuState>& gpus, unsigned i, unsigned leases, std::uint64_t declared) {
  gpus[i].has_context = true;
  gpus[i].shared_leases = leases;
  gpus[i].unallocated_reservation_bytes = declared;
}

TEST(Schedule, SharesPackOntoTheFullestGpuThatFits) {
  auto gpus = IdleGpus(3, 80 * kGiB);
  ShareOut(gpus, 0, 1, 60 * kGiB);  // 19 GiB of room (1 GiB margin)
  ShareOut(gpus, 1, 1, 30 * kGiB);  // 49 GiB
  const Limits limits{1 * kGiB};
  // 30 GiB: not on GPU0; GPU1 leaves 19 GiB, the idle GPU2 would leave 49.
  auto d = Schedule(gpus, {Shared("a", 30 * kGiB, 3)}, limits);
  ASSERT_TRUE(d[0].granted) << ReasonsOf(d[0]);
  EXPECT_EQ(d[0].gpus, Indices{1});
  // 10 GiB fits everywhere; GPU0 is the fullest.
  d = Schedule(gpus, {Shared("b", 10 * kGiB, 3)}, limits);
  EXPECT_EQ(d[0].gpus, Indices{0});
  // Within one decision: each share sees the ones granted before it.
  d = Schedule(IdleGpus(2, 80 * kGiB), {Shared("a", 30 * kGiB, 2), Shared("b", 30 * kGiB, 2), Shared("c", 30 * kGiB, 2)}, limits);
  for (const auto& x : d) ASSERT_TRUE(x.granted) << ReasonsOf(x);
  EXPECT_EQ(d[0].gpus, Indices{0});
  EXPECT_EQ(d[1].gpus, Indices{0}) << "onto the shared GPU, not the idle one";
  EXPECT_EQ(d[2].gpus, Indices{1}) << "79 GiB of room on GPU0 holds two, not three";
}

TEST(Schedule, BestFitTiesGoToFewestSharedLeasesThenLeastBusyThenPciOrder) {
  auto gpus = IdleGpus(4, 80 * kGiB);
  ShareOut(gpus, 0, 2, 40 * kGiB);
  ShareOut(gpus, 1, 1, 40 * kGiB);
  ShareOut(gpus, 2, 1, 40 * kGiB);
  ShareOut(gpus, 3, 1, 40 * kGiB);
  gpus[1].util_pct = 50;
  gpus[2].util_pct = 20;
  gpus[3].util_pct = 20;
  auto d = Schedule(gpus, {Shared("a", 10 * kGiB, 4)}, kNoMargin);
  EXPECT_EQ(d[0].gpus, Indices{2}) << "same room left everywhere: one lease, not two; 20 %, not 50 %; then PCI order";
}

TEST(Schedule, AnExclusiveRequestStillFindsAWholeGpuAfterShares) {
  // Three 30 GiB shares then a whole GPU on 3 GPUs: best fit puts two shares on GPU0 and the third
  // on GPU1, so GPU2 is whole. Most free first (the old default, still --order memory) spreads them
  // over all three and the whole-GPU job waits.
  std::vector<Request> line = {Shared("a", 30 * kGiB, 3), Shared("b", 30 * kGiB, 3), Shared("c", 30 * kGiB, 3),
                               Whole("x", 1, 3)};
  auto d = Schedule(IdleGpus(3, 80 * kGiB), line, Limits{1 * kGiB});
  for (const auto& x : d) ASSERT_TRUE(x.granted) << ReasonsOf(x);
  EXPECT_EQ(d[3].gpus, Indices{2});
  for (int k = 0; k < 3; ++k) line[k].order = Order::kMostFree;
  d = Schedule(IdleGpus(3, 80 * kGiB), line, Limits{1 * kGiB});
  EXPECT_NE(d[0].gpus, d[1].gpus);
  EXPECT_NE(d[1].gpus, d[2].gpus);
  EXPECT_FALSE(d[3].granted) << "every GPU partly used";
}

TEST(Schedule, AnExplicitOrderIsKeptForShares) {
  auto gpus = IdleGpus(3, 80 * kGiB);
  ShareOut(gpus, 0, 1, 40 * kGiB);
  ShareOut(gpus, 1, 1, 60 * kGiB);
  gpus[0].util_pct = 90;
  gpus[2].util_pct = 50;
  Request r = Shared("a", 10 * kGiB, 3);
  EXPECT_EQ(Schedule(gpus, {r}, kNoMargin)[0].gpus, Indices{1}) << "default: best fit";
  r.order = Order::kMostFree;
  EXPECT_EQ(Schedule(gpus, {r}, kNoMargin)[0].gpus, Indices{2});
  r.order = Order::kLeastUtil;
  EXPECT_EQ(Schedule(gpus, {r}, kNoMargin)[0].gpus, Indices{1});
  r.order = Order::kPci;
  EXPECT_EQ(Schedule(gpus, {r}, kNoMargin)[0].gpus, Indices{0});
  r.order = Order::kBestFit;
  EXPECT_EQ(Schedule(gpus, {r}, kNoMargin)[0].gpus, Indices{1});
}

TEST(Schedule, SharesOnSeveralGpusStillPreferNvlinkedSets) {
  auto gpus = IdleGpus(4, 80 * kGiB);
  // Pairs (0,2) and (1,3) are linked. By best fit alone: 1 (fullest), then 0.
  gpus[0].nvlink_peers = {2};
  gpus[2].nvlink_peers = {0};
  gpus[1].nvlink_peers = {3};
  gpus[3].nvlink_peers = {1};
  ShareOut(gpus, 1, 1, 50 * kGiB);
  ShareOut(gpus, 0, 1, 40 * kGiB);
  ShareOut(gpus, 2, 1, 10 * kGiB);
  Request r = Shared("pair", 20 * kGiB, 4);
  r.count = 2;
  auto d = Schedule(gpus, {r}, kNoMargin);
  ASSERT_TRUE(d[0].granted) << ReasonsOf(d[0]);
  EXPECT_EQ(d[0].gpus, (Indices{1, 3})) << "the linked set grown from the best fit";
  // With GPU3 unable to take it, the linked pair (0,2) beats the unlinked top two (1,0).
  ShareOut(gpus, 3, 1, 70 * kGiB);
  d = Schedule(gpus, {r}, kNoMargin);
  ASSERT_TRUE(d[0].granted) << ReasonsOf(d[0]);
  EXPECT_EQ(d[0].gpus, (Indices{0, 2}));
}

// ---- Exclusive and shared leases do not mix ---------------------------------------------------

TEST(Schedule, ExclusiveRequestsNeverShareAGpu) {
  auto gpus = IdleGpus(1);
  gpus[0].shared_leases = 1;
  gpus[0].unallocated_reservation_bytes = 1 * kGiB;
  auto d = Schedule(gpus, {Whole("x", 1, 1)}, kNoMargin);
  EXPECT_FALSE(d[0].granted);
  EXPECT_TRUE(HasReason(d[0], "GPU0: shared by 1 gpulane job")) << ReasonsOf(d[0]);

  gpus = IdleGpus(1);
  gpus[0].exclusive_holder = "alice (job r1)";
  d = Schedule(gpus, {Shared("m", 1 * kGiB, 1)}, kNoMargin);
  EXPECT_FALSE(d[0].granted);
  EXPECT_TRUE(HasReason(d[0], "GPU0: leased by alice (job r1)")) << ReasonsOf(d[0]);

  // Within one decision too, in both orders.
  gpus = IdleGpus(1);
  d = Schedule(gpus, {Shared("m", 1 * kGiB, 1), Whole("x", 1, 1)}, kNoMargin);
  EXPECT_TRUE(d[0].granted);
  EXPECT_FALSE(d[1].granted);
  d = Schedule(gpus, {Whole("x", 1, 1), Shared("m", 1 * kGiB, 1)}, kNoMargin);
  EXPECT_TRUE(d[0].granted);
  EXPECT_FALSE(d[1].granted);
  EXPECT_TRUE(AnyReasonStartsWith(d[1], "GPU0: leased by")) << ReasonsOf(d[1]);
}

TEST(Schedule, ExclusiveProcessComputeModeTakesOneJob) {
  auto gpus = IdleGpus(1);
  gpus[0].one_context_only = true;
  auto d = Schedule(gpus, {Shared("a", 1 * kGiB, 1), Shared("b", 1 * kGiB, 1)}, kNoMargin);
  EXPECT_TRUE(d[0].granted);
  EXPECT_FALSE(d[1].granted);
  EXPECT_TRUE(AnyReasonStartsWith(d[1], "GPU0: EXCLUSIVE_PROCESS")) << ReasonsOf(d[1]);

  // The same two on a GPU in the default mode share it.
  gpus[0].one_context_only = false;
  d = Schedule(gpus, {Shared("a", 1 * kGiB, 1), Shared("b", 1 * kGiB, 1)}, kNoMargin);
  EXPECT_TRUE(d[0].granted);
  EXPECT_TRUE(d[1].granted);
}

// ---- Processes outside gpulane ----------------------------------------------------------------

TEST(Schedule, ForeignProcessesBlockAGpuUnlessShareForeign) {
  auto gpus = IdleGpus(2);
  gpus[0].foreign = {"bob's python (pid 12)"};
  auto d = Schedule(gpus, {Whole("one", 1, 2)}, kNoMargin);
  ASSERT_TRUE(d[0].granted);
  EXPECT_EQ(d[0].gpus, Indices{1});

  d = Schedule(gpus, {Whole("two", 2, 2)}, kNoMargin);
  EXPECT_FALSE(d[0].granted);
  EXPECT_FALSE(d[0].impossible) << "the process may end";
  EXPECT_EQ(d[0].possible, 2u);
  EXPECT_TRUE(HasReason(d[0], "GPU0: in use by bob's python (pid 12)")) << ReasonsOf(d[0]);

  Request sharing = Whole("two", 2, 2);
  sharing.share_foreign = true;
  d = Schedule(gpus, {sharing}, kNoMargin);
  ASSERT_TRUE(d[0].granted) << ReasonsOf(d[0]);
  EXPECT_EQ(std::set<unsigned>(d[0].gpus.begin(), d[0].gpus.end()), (std::set<unsigned>{0, 1}));

  Request mem = Shared("m", 1 * kGiB, 2);
  mem.allowed_uuids = Uuids({0});
  d = Schedule(gpus, {mem}, kNoMargin);
  EXPECT_FALSE(d[0].granted) << "shared leases also keep off foreign processes";
}

// ---- Unknown is not free ----------------------------------------------------------------------

TEST(Schedule, AGpuWhoseProcessesAreUnknownQualifiesOnlyWithShareForeign) {
  auto gpus = IdleGpus(2);
  gpus[0].processes_known = false;
  gpus[1].exclusive_holder = "alice (job 3)";
  auto d = Schedule(gpus, {Whole("a", 1, 2)}, kNoMargin);
  EXPECT_FALSE(d[0].granted) << "an unreported process list is not an empty one";
  EXPECT_TRUE(AnyReasonStartsWith(d[0], "GPU0: its processes are not reported by NVML")) << ReasonsOf(d[0]);
  Request sharing = Whole("a", 1, 2);
  sharing.share_foreign = true;
  d = Schedule(gpus, {sharing}, kNoMargin);
  ASSERT_TRUE(d[0].granted) << ReasonsOf(d[0]);
  EXPECT_EQ(d[0].gpus, Indices{0});
}

TEST(Schedule, AMemoryRequestOnAGpuWhoseMemoryIsUnknownFailsAtOnce) {
  auto gpus = IdleGpus(1);
  gpus[0].free_bytes.reset();
  gpus[0].total_bytes.reset();
  auto d = Schedule(gpus, {Shared("m", 1 * kGiB, 1)}, kNoMargin);
  EXPECT_FALSE(d[0].granted);
  EXPECT_TRUE(d[0].impossible) << "it would otherwise wait on '0 MiB free' forever";
  EXPECT_TRUE(HasReason(d[0], "GPU0: memory not reported by NVML")) << ReasonsOf(d[0]);
  Request min_free = Whole("w", 1, 1);
  min_free.min_free_bytes = 1 * kGiB;
  EXPECT_TRUE(Schedule(gpus, {min_free}, kNoMargin)[0].impossible);
  EXPECT_TRUE(Schedule(gpus, {Whole("w", 1, 1)}, kNoMargin)[0].granted) << "a whole GPU needs no memory figure";
}

TEST(Schedule, UnreportedMemoryRanksAfterEveryReportedFigure) {
  auto gpus = IdleGpus(2);
  gpus[0].free_bytes.reset();
  gpus[1].free_bytes = 1 * kGiB;
  EXPECT_EQ(Schedule(gpus, {Whole("a", 1, 2)}, kNoMargin)[0].gpus, Indices{1});
}

// ---- Compute modes ----------------------------------------------------------------------------

TEST(Schedule, ExclusiveProcessGpuWithAForeignContextTakesNoJobEvenWithShareForeignOrMem) {
  auto gpus = IdleGpus(1);
  gpus[0].one_context_only = true;
  gpus[0].has_context = true;
  gpus[0].foreign = {"bob's python (pid 12)"};
  Request sharing = Whole("a", 1, 1);
  sharing.share_foreign = true;
  Request mem = Shared("m", 1 * kGiB, 1);
  mem.share_foreign = true;
  for (const Request& r : {sharing, mem}) {
    auto d = Schedule(gpus, {r}, kNoMargin);
    EXPECT_FALSE(d[0].granted) << "CUDA refuses a second context on it";
    EXPECT_FALSE(d[0].impossible) << "the other context may end";
    EXPECT_TRUE(HasReason(d[0], "GPU0: EXCLUSIVE_PROCESS compute mode and already in use by bob's python (pid 12)"))
        << ReasonsOf(d[0]);
  }
  gpus[0].has_context = false;
  gpus[0].foreign.clear();
  EXPECT_TRUE(Schedule(gpus, {mem}, kNoMargin)[0].granted);
}

// ---- Must be met now (pick, run --no-wait) ----------------------------------------------------

TEST(GrantedNow, GrantedGpusOrTheOneReasonTextWithItsKind) {
  auto gpus = IdleGpus(2);
  gpus[0].exclusive_holder = "alice (job 7)";
  Request one = Whole("b", 1, 2);
  auto d = Schedule(gpus, {one}, kNoMargin);
  auto granted = GrantedNow(one, d[0], 2);
  ASSERT_TRUE(granted.ok());
  EXPECT_EQ(*granted, Indices{1});

  Request two = Whole("b", 2, 2);
  d = Schedule(gpus, {two}, kNoMargin);
  auto not_now = GrantedNow(two, d[0], 2);
  ASSERT_FALSE(not_now.ok());
  EXPECT_EQ(not_now.error().kind, ErrorKind::kNotEnoughGpus);
  EXPECT_EQ(not_now.error().message,
            "too few GPUs free now: 1 of 2 requested GPUs qualify (GPU0: leased by alice (job 7)); 'gpulane run' "
            "without --no-wait waits for them");

  Request three = Whole("b", 3, 2);
  d = Schedule(gpus, {three}, kNoMargin);
  auto never = GrantedNow(three, d[0], 2);
  ASSERT_FALSE(never.ok());
  EXPECT_EQ(never.error().kind, ErrorKind::kInvalidArgument) << "more GPUs than exist is a bad request";
  EXPECT_EQ(never.error().message, "asked for 3 GPUs but only 2 of the 2 GPUs here can ever qualify: ask for fewer");

  // A new user's pick(n=3) on two GPUs was told "or a smaller --min-free": no minimum makes a
  // third GPU; the advice is for GPUs a minimum rules out.
  Request three_min = three;
  three_min.min_free_bytes = 1ull << 30;
  three_min.mem_bytes = 1ull << 30;
  d = Schedule(gpus, {three_min}, kNoMargin);
  auto fewer = GrantedNow(three_min, d[0], 2);
  ASSERT_FALSE(fewer.ok());
  EXPECT_EQ(fewer.error().message,
            "asked for 3 GPUs with 1.0 GiB each but only 2 of the 2 GPUs here can ever qualify: ask for fewer");
}

// ---- Requests that can never be met -----------------------------------------------------------

TEST(Schedule, ImpossibleRequestsAreFlaggedWithHowManyGpusCouldQualify) {
  auto gpus = IdleGpus(2);
  auto d = Schedule(gpus, {Whole("many", 3, 2)}, kNoMargin);
  EXPECT_FALSE(d[0].granted);
  EXPECT_TRUE(d[0].impossible);
  EXPECT_EQ(d[0].possible, 2u);
  EXPECT_TRUE(d[0].gpus.empty()) << "an impossible request reserves nothing";

  Request only_one = Whole("only", 2, 2);
  only_one.allowed_uuids = Uuids({1});
  d = Schedule(gpus, {only_one}, kNoMargin);
  EXPECT_TRUE(d[0].impossible);
  EXPECT_EQ(d[0].possible, 1u);
  EXPECT_TRUE(AnyReasonStartsWith(d[0], "GPU0: not among the GPUs this job may use")) << ReasonsOf(d[0]);

  d = Schedule(gpus, {Shared("huge", 80 * kGiB, 2)}, Limits{1 * kGiB});
  EXPECT_TRUE(d[0].impossible);
  EXPECT_EQ(d[0].possible, 0u);
  EXPECT_TRUE(HasReason(d[0], "GPU0: 80.0 GiB + 1.0 GiB margin > 80.0 GiB total")) << ReasonsOf(d[0]);
  EXPECT_FALSE(Schedule(gpus, {Shared("fits", 79 * kGiB, 2)}, Limits{1 * kGiB})[0].impossible);

  Request min_free = Whole("min", 1, 2);
  min_free.min_free_bytes = 81 * kGiB;
  d = Schedule(gpus, {min_free}, kNoMargin);
  EXPECT_TRUE(d[0].impossible);
  EXPECT_TRUE(HasReason(d[0], "GPU1: 80.0 GiB total < 81.0 GiB")) << ReasonsOf(d[0]);

  // What the driver reserves is never free (issue 23, item 4): judged by total - reserved.
  auto reserved = IdleGpus(1);
  reserved[0].reserved_bytes = 600ULL << 20;
  min_free.min_free_bytes = 80 * kGiB;
  d = Schedule(reserved, {min_free}, kNoMargin);
  EXPECT_TRUE(d[0].impossible);
  EXPECT_TRUE(HasReason(d[0], "GPU0: 79.4 GiB free at most < 80.0 GiB")) << ReasonsOf(d[0]);
  d = Schedule(reserved, {Shared("all", 79 * kGiB, 1)}, Limits{1 * kGiB});
  EXPECT_TRUE(d[0].impossible);
  EXPECT_TRUE(HasReason(d[0], "GPU0: 79.0 GiB + 1.0 GiB margin > 79.4 GiB free at most")) << ReasonsOf(d[0]);
  min_free.min_free_bytes = 79 * kGiB;
  EXPECT_FALSE(Schedule(reserved, {min_free}, kNoMargin)[0].impossible);

  gpus[1].usable = false;
  gpus[1].unusable_reason = "failed (NVML_ERROR_GPU_IS_LOST)";
  d = Schedule(gpus, {Whole("two", 2, 2)}, kNoMargin);
  EXPECT_TRUE(d[0].impossible);
  EXPECT_EQ(d[0].possible, 1u);
  EXPECT_TRUE(HasReason(d[0], "GPU1: failed (NVML_ERROR_GPU_IS_LOST)")) << ReasonsOf(d[0]);
}

// An impossible request does not hold anything up for the ones behind it.
TEST(Schedule, AnImpossibleRequestDoesNotBlockTheLine) {
  auto gpus = IdleGpus(2);
  auto d = Schedule(gpus, {Whole("many", 3, 2), Whole("one", 1, 2)}, kNoMargin);
  EXPECT_TRUE(d[0].impossible);
  EXPECT_TRUE(d[1].granted);
}

// ---- Reasons ----------------------------------------------------------------------------------

TEST(Schedule, AWaiterGetsOneReasonPerGpuThatDoesNotQualifyNow) {
  auto gpus = IdleGpus(5);
  gpus[0].exclusive_holder = "alice (job r4121)";
  gpus[1].foreign = {"bob's python (pid 12)"};
  gpus[2].free_bytes = 3 * kGiB;
  gpus[3].util_pct = 95;
  // GPU4 qualifies.
  Request r = Whole("r", 2, 5);
  r.min_free_bytes = 20 * kGiB;
  r.max_util_pct = 50;
  Request next = Whole("next", 1, 5);
  next.allowed_uuids = Uuids({4});
  auto d = Schedule(gpus, {r, next}, kNoMargin);
  ASSERT_FALSE(d[0].granted);
  EXPECT_EQ(d[0].position, 1u);
  EXPECT_EQ(d[0].reasons,
            (std::vector<std::string>{"GPU0: leased by alice (job r4121)", "GPU1: in use by bob's python (pid 12)",
                                      "GPU2: 3.0 GiB free < 20.0 GiB", "GPU3: 95% busy > 50%"}));
  // The request behind it cannot take GPU4, which the first one reserved.
  EXPECT_FALSE(d[1].granted);
  EXPECT_TRUE(HasReason(d[1], "GPU4: held for an earlier request, 1st in line (r's)")) << ReasonsOf(d[1]);
}

TEST(Schedule, UnreportedUtilisationFailsAUtilisationLimit) {
  auto gpus = IdleGpus(1);
  gpus[0].util_pct.reset();
  Request r = Whole("r", 1, 1);
  r.max_util_pct = 50;
  auto d = Schedule(gpus, {r}, kNoMargin);
  EXPECT_FALSE(d[0].granted);
  EXPECT_TRUE(HasReason(d[0], "GPU0: utilisation not reported")) << ReasonsOf(d[0]);
  EXPECT_TRUE(Schedule(gpus, {Whole("r", 1, 1)}, kNoMargin)[0].granted);
}

// ---- Which GPUs ---------------------------------------------------------------------------------

TEST(Schedule, OrderPicksMostFreeLeastBusyFirstInPciOrderOrBestFit) {
  auto gpus = IdleGpus(3);
  gpus[0].free_bytes = 10 * kGiB;
  gpus[0].util_pct = 0;
  gpus[1].free_bytes = 70 * kGiB;
  gpus[1].util_pct = 90;
  gpus[2].free_bytes = 40 * kGiB;
  gpus[2].util_pct = 30;
  Request r = Whole("r", 1, 3);
  EXPECT_EQ(Schedule(gpus, {r}, kNoMargin)[0].gpus, Indices{1});
  r.order = Order::kLeastUtil;
  EXPECT_EQ(Schedule(gpus, {r}, kNoMargin)[0].gpus, Indices{0});
  r.order = Order::kBestFit;
  EXPECT_EQ(Schedule(gpus, {r}, kNoMargin)[0].gpus, Indices{0}) << "whole GPUs get best fit only when asked";
  r.order = Order::kPci;
  gpus[0].exclusive_holder = "alice (job r1)";
  EXPECT_EQ(Schedule(gpus, {r}, kNoMargin)[0].gpus, Indices{1});
}

TEST(Schedule, PrefersGpusJoinedByNvlink) {
  auto gpus = IdleGpus(4);
  // Pairs (0,2) and (1,3) are linked; by ranking alone it would take 0 and 1.
  gpus[0].nvlink_peers = {2};
  gpus[2].nvlink_peers = {0};
  gpus[1].nvlink_peers = {3};
  gpus[3].nvlink_peers = {1};
  auto d = Schedule(gpus, {Whole("pair", 2, 4)}, kNoMargin);
  ASSERT_TRUE(d[0].granted);
  EXPECT_EQ(std::set<unsigned>(d[0].gpus.begin(), d[0].gpus.end()), (std::set<unsigned>{0, 2}));
}

bool LinkedIn(const std::vector<std::pair<unsigned, unsigned>>& links, unsigned a, unsigned b) {
  for (auto [x, y] : links)
    if ((x == a && y == b) || (x == b && y == a)) return true;
  return false;
}

TEST(ChooseLinkedSet, TakesTheBestRankedFullyLinkedSet) {
  const std::vector<std::pair<unsigned, unsigned>> links = {{0, 1}, {2, 3}, {4, 5}, {4, 6}, {5, 6}};
  auto linked = [&](unsigned a, unsigned b) { return LinkedIn(links, a, b); };
  EXPECT_EQ(ChooseLinkedSet({0, 2, 1, 3}, 2, linked), (Indices{0, 1}));
  EXPECT_EQ(ChooseLinkedSet({2, 0, 3, 1}, 2, linked), (Indices{2, 3}));
  EXPECT_EQ(ChooseLinkedSet({0, 4, 2, 5, 6}, 3, linked), (Indices{4, 5, 6}));
}

TEST(ChooseLinkedSet, FallsBackToTheTopOfTheRanking) {
  auto none = [](unsigned, unsigned) { return false; };
  EXPECT_EQ(ChooseLinkedSet({3, 1, 2}, 2, none), (Indices{3, 1}));
  EXPECT_EQ(ChooseLinkedSet({3, 1, 2}, 1, none), (Indices{3}));
  EXPECT_EQ(ChooseLinkedSet({3, 1}, 2, none), (Indices{3, 1}));
}

}  // namespace
}  // namespace gpulane::sched

namespace gpulane::sched {
namespace {

// ---- Drained GPUs (the daemon's sampler saw an Xid error or a lost GPU) -------------------------

TEST(Schedule, ADrainedGpuTakesNoNewJobButRequestsWaitForItInsteadOfFailing) {
  auto gpus = IdleGpus(2);
  gpus[1].drained = "GPU 1 raised Xid 79";
  std::vector<Request> line = {Whole("a", 1, 2), Whole("b", 1, 2)};
  line[1].allowed_uuids = Uuids({1});  // b may only use the drained GPU
  auto d = Schedule(gpus, line, kNoMargin);
  EXPECT_TRUE(d[0].granted);
  EXPECT_EQ(d[0].gpus, Indices{0}) << "never the drained GPU";
  EXPECT_FALSE(d[1].granted);
  EXPECT_FALSE(d[1].impossible) << "drained for now, not forever: b waits";
  EXPECT_TRUE(HasReason(d[1], "GPU1: drained: GPU 1 raised Xid 79")) << ReasonsOf(d[1]);
  gpus[1].drained.reset();
  d = Schedule(gpus, {line[1]}, kNoMargin);
  EXPECT_TRUE(d[0].granted) << "healthy again";
}

}  // namespace
}  // namespace gpulane::sched
