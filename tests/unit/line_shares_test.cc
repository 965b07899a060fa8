// The lease line's order with published fair-share factors (lease/line_shares.h): pure, on given
// times, and what `gpulane pick` would get as a newcomer.
#include "lease/line_shares.h"

#include <gtest/gtest.h>

#include "lease/occupancy.h"

namespace gpulane::lease {
namespace {

constexpr double kNow = 1.8e9;  // seconds since the epoch

TicketRecord Ticket(const std::string& user, double seq_s, int priority = 0) {
  TicketRecord t;
  t.request.user = user;
  t.request.priority = priority;
  t.seq = static_cast<std::uint64_t>(seq_s * 1e9);
  t.id = user + std::to_string(t.seq);
  return t;
}

sched::LineShares Shares(std::map<std::string, double> factors) {
  sched::LineShares s;
  s.factor_of_user = std::move(factors);
  s.written_s = kNow;
  return s;
}

std::vector<std::string> Users(const std::vector<TicketRecord>& line) {
  std::vector<std::string> out;
  for (const auto& t : line) out.push_back(t.request.user);
  return out;
}

TEST(LineShares, ALightUsersLaterRequestGoesBeforeAHeavyUsersEarlierOne) {
  std::vector<TicketRecord> line = {Ticket("alice", kNow - 60), Ticket("bob", kNow - 1)};
  SortLine(line, nullptr, kNow);
  EXPECT_EQ(Users(line), (std::vector<std::string>{"alice", "bob"})) << "without factors: submission order";
  const sched::LineShares shares = Shares({{"alice", 0.1}});  // bob used nothing: factor 1
  SortLine(line, &shares, kNow);
  EXPECT_EQ(Users(line), (std::vector<std::string>{"bob", "alice"}));
}

TEST(LineShares, PriorityClassComesFirstAndAgeCatchesUp) {
  const sched::LineShares shares = Shares({{"alice", 0.1}});
  std::vector<TicketRecord> line = {Ticket("bob", kNow - 1, -1), Ticket("alice", kNow - 60)};
  SortLine(line, &shares, kNow);
  EXPECT_EQ(Users(line), (std::vector<std::string>{"alice", "bob"})) << "bob lowered his --priority";
  // Waiting max_age (7 d) is worth the whole factor's range: alice's old request overtakes.
  line = {Ticket("bob", kNow - 1), Ticket("alice", kNow - shares.max_age_s)};
  SortLine(line, &shares, kNow);
  EXPECT_EQ(Users(line), (std::vector<std::string>{"alice", "bob"}));
  // Same user: by age, i.e. submission.
  line = {Ticket("alice", kNow - 5), Ticket("alice", kNow - 50)};
  SortLine(line, &shares, kNow);
  EXPECT_EQ(line[0].seq, Ticket("alice", kNow - 50).seq);
}

TEST(LineShares, JsonRoundTripsAndADamagedFileOrdersNothing) {
  sched::LineShares s = Shares({{"alice", 0.25}, {"bob", 1}});
  s.weight_age = 0.5;
  auto back = LineSharesFromJson(LineSharesToJson(s));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->factor_of_user, s.factor_of_user);
  EXPECT_EQ(back->weight_age, 0.5);
  EXPECT_EQ(back->written_s, kNow);
  for (const char* bad : {R"({"written_s": 1, "weight_fair_share": 1, "weight_age": 1, "max_age_s": 1, "factors": {"a": 1.5}})",
                          R"({"written_s": 1, "weight_fair_share": -1, "weight_age": 1, "max_age_s": 1, "factors": {}})",
                          R"({"written_s": 1, "weight_fair_share": 1, "weight_age": 1, "factors": {}})",
                          R"({"written_s": 1, "weight_fair_share": 1, "weight_age": 1, "max_age_s": 1, "factors": {"a": "x"}})",
                          R"([1, 2])"})
    EXPECT_FALSE(LineSharesFromJson(nlohmann::json::parse(bad))) << bad;
}

TEST(LineShares, FactorsOfADaemonThatStoppedAreStale) {
  const sched::LineShares s = Shares({});
  EXPECT_TRUE(LineSharesFresh(s, kNow + kLineSharesStaleS));
  EXPECT_FALSE(LineSharesFresh(s, kNow + kLineSharesStaleS + 1));
  EXPECT_FALSE(LineSharesFresh(s, kNow - 3600)) << "written an hour in the future: a clock set back";
}

TEST(LineShares, OnlyAMovedFactorOrOtherUsersArePublishedAgain) {
  const sched::LineShares a = Shares({{"alice", 0.5}});
  EXPECT_FALSE(LineSharesDiffer(a, Shares({{"alice", 0.5004}})));
  EXPECT_TRUE(LineSharesDiffer(a, Shares({{"alice", 0.51}})));
  EXPECT_TRUE(LineSharesDiffer(a, Shares({{"alice", 0.5}, {"bob", 1}})));
  EXPECT_TRUE(LineSharesDiffer(a, Shares({{"carol", 0.5}})));
}

// `gpulane pick` as bob, with one GPU free and alice's request waiting for two: bob's place is
// ahead of alice's when she used her share, so he gets the GPU she reserves otherwise.
TEST(LineShares, APickOfALightUserStandsBeforeAHeavyUsersWaitingRequest) {
  Occupancy occupancy;
  occupancy.gpus.resize(2);
  for (unsigned i = 0; i < 2; ++i) {
    occupancy.gpus[i].index = i;
    occupancy.gpus[i].uuid = "GPU-" + std::to_string(i);
    occupancy.gpus[i].total_bytes = occupancy.gpus[i].free_bytes = 80ull << 30;
  }
  occupancy.gpus[1].foreign = {"carol's python (pid 4242)"};  // busy outside gpulane
  occupancy.gpus[1].has_context = true;
  occupancy.gpus[1].free_bytes = 40ull << 30;
  TicketRecord alice = Ticket("alice", kNow - 30);
  alice.request.count = 2;
  sched::Request bob;
  bob.user = "bob";
  bob.count = 1;
  sched::Limits limits;
  limits.policy = sched::PolicyKind::kFifo;  // strict order: whoever is first in line reserves
  limits.now_s = kNow;
  EXPECT_FALSE(DecideNewcomer(occupancy, {alice}, bob, limits, nullptr, kNow).granted)
      << "behind alice, who reserves the free GPU";
  const sched::LineShares shares = Shares({{"alice", 0.1}});
  EXPECT_TRUE(DecideNewcomer(occupancy, {alice}, bob, limits, &shares, kNow).granted);
}

}  // namespace
}  // namespace gpulane::lease
