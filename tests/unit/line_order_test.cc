// The one line order (sched/line_order.h) and its users: the daemon's launch decision
// (sched::PlanLaunches) and the lease directory's line (lease/line_shares.h SortLine) must put the
// same jobs in the same order, or a queued job's supervisor waits behind a request the daemon's
// queue put after it.
#include "sched/line_order.h"

#include <gtest/gtest.h>

#include <random>

#include "lease/line_shares.h"
#include "sched/fairshare.h"
#include "sched/launch.h"

namespace gpulane {
namespace {

TEST(LineOrder, ClassThenLinePriorityThenArrivalThenName) {
  using sched::LineBefore;
  EXPECT_TRUE(LineBefore({1, 0.0, 9, "b"}, {0, 2.0, 1, "a"})) << "a higher --priority class goes first";
  EXPECT_TRUE(LineBefore({0, 1.5, 9, "b"}, {0, 1.0, 1, "a"})) << "then the higher line priority";
  EXPECT_TRUE(LineBefore({0, 1.0, 1, "b"}, {0, 1.0, 2, "a"})) << "then the earlier arrival";
  EXPECT_TRUE(LineBefore({0, 1.0, 1, "a"}, {0, 1.0, 1, "b"})) << "then the name";
  EXPECT_FALSE(LineBefore({0, 1.0, 1, "a"}, {0, 1.0, 1, "a"})) << "irreflexive";
}

// Property: for random jobs of random users (priority classes, factors, submission times, many
// with an age past max_age so that their priorities tie), the order in which PlanLaunches looks at
// the queue equals the order SortLine gives their tickets in the lease directory, with the
// daemon's factors published as the lease line's shares.
TEST(LineOrder, PropertyTheDaemonsQueueAndTheLeaseLineOrderRandomJobsAlike) {
  constexpr double kNow = 1.8e9;
  std::mt19937 rng(25);
  for (int round = 0; round < 200; ++round) {
    sched::FairShareSettings fs;
    fs.max_age_s = 3600;
    sched::LineShares shares;
    shares.weight_fair_share = fs.weight_fair_share;
    shares.weight_age = fs.weight_age;
    shares.max_age_s = fs.max_age_s;
    shares.written_s = kNow;
    const int users = 1 + static_cast<int>(rng() % 4);
    std::vector<std::string> names;
    for (int u = 0; u < users; ++u) {
      names.push_back("user" + std::to_string(u));
      if (rng() % 3) shares.factor_of_user[names.back()] = static_cast<double>(rng() % 5) / 4;  // unlisted: 1
    }
    const int n = 1 + static_cast<int>(rng() % 40);
    std::vector<double> submit_s;  // whole seconds, ascending: the daemon numbers jobs in this order
    double t = kNow - 7200;
    for (int i = 0; i < n; ++i) submit_s.push_back(t += static_cast<double>(rng() % 300));
    std::vector<sched::QueuedJob> queue;
    std::vector<lease::TicketRecord> tickets;
    for (int i = 0; i < n; ++i) {
      const std::string& user = names[rng() % names.size()];
      const int priority = static_cast<int>(rng() % 3) - 1;
      const auto factor = shares.factor_of_user.find(user);
      sched::QueuedJob q;
      q.id = i + 1;
      q.priority = priority;
      q.fair_priority =
          sched::PriorityOf(factor == shares.factor_of_user.end() ? 1.0 : factor->second, kNow - submit_s[i], fs).value;
      queue.push_back(q);
      lease::TicketRecord ticket;  // the job's supervisor's ticket: its seq is the submission time
      ticket.id = std::to_string(i + 1);
      ticket.seq = static_cast<std::uint64_t>(submit_s[i]) * 1000000000ULL + static_cast<std::uint64_t>(i);
      ticket.request.user = user;
      ticket.request.priority = priority;
      tickets.push_back(ticket);
    }
    std::shuffle(queue.begin(), queue.end(), rng);
    std::shuffle(tickets.begin(), tickets.end(), rng);
    sched::LaunchLimits limits;
    limits.max_waiting = 100;  // the lookahead covers the whole queue
    const sched::LaunchPlan plan =
        sched::PlanLaunches(queue, [](const sched::JobRef&) { return sched::DependencyState::kCompleted; }, limits);
    lease::SortLine(tickets, &shares, kNow);
    std::vector<std::int64_t> line;
    for (const auto& ticket : tickets) line.push_back(std::stoll(ticket.id));
    ASSERT_EQ(plan.order, line) << "round " << round;
  }
}

}  // namespace
}  // namespace gpulane
