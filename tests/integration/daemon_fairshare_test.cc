// Fair share through the real binary and the fake NVML: a system daemon on one GPU, letting one
// queued job at a time wait for it (daemon.max_waiting = 1). Alice floods the queue; bob submits
// one job later; bob's job starts before alice's remaining ones, and `gpulane queue` says why hers
// wait (her priority, her use, bob's job ahead); `gpulane share` shows both users. Needs root (two
// test users through setpriv); skipped otherwise.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <memory>

#include "support/daemon_fixture.h"
#include "support/text.h"

namespace gpulane::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class DaemonFairShare : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = TwoTestUsers(&a_, &b_)) GTEST_SKIP() << *why;
    // The daemon's own config (root's file, so machine keys count); clients read none.
    char dir[] = "/tmp/gpulane-fairshare-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    config_dir_ = dir;
    const fs::path config = config_dir_ / "daemon.toml";
    std::ofstream(config) << "[daemon]\nmax_waiting = 1\n[web]\nlisten = \"off\"\n";
    d_ = std::make_unique<TestDaemon>(
        DaemonOptions{.state = IdleGpus(1), .system_mode = true, .daemon_env = {{"GPULANE_CONFIG", config.string()}}});
  }
  void TearDown() override {
    d_.reset();
    if (!config_dir_.empty()) fs::remove_all(config_dir_);
  }

  std::int64_t SubmitAs(const TestUser& user, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"submit"};
    argv.insert(argv.end(), args.begin(), args.end());
    RunResult r = d_->GpulaneAs(user, argv);
    if (r.exit_code != 0 || r.out.empty()) {
      ADD_FAILURE() << user.name << ": gpulane submit failed: exit " << r.exit_code << ": " << r.err;
      return -1;
    }
    return std::stoll(r.out);
  }

  TestUser a_, b_;
  fs::path config_dir_;
  std::unique_ptr<TestDaemon> d_;
};

TEST_F(DaemonFairShare, ALightUsersLaterJobStartsBeforeAHeavyUsersQueuedOnes) {
  TestDaemon& d = *d_;
  // One log both users' jobs append to, and a gate that holds alice's first job on the GPU.
  const fs::path log = d.work() / "marks.log", gate = d.work() / "gate";
  std::ofstream(log).close();
  ASSERT_EQ(chmod(log.c_str(), 0666), 0);
  std::vector<std::string> gated = {"--"}, quick = {"--"};
  for (const auto& w : MarkedJob(log.string(), gate.string())) gated.push_back(w);
  for (const auto& w : MarkedJob(log.string())) quick.push_back(w);

  const std::int64_t a1 = SubmitAs(a_, gated);
  ASSERT_TRUE(d.WaitForState(a1, "running"));
  std::vector<std::int64_t> alice_rest;
  for (int i = 0; i < 4; ++i) alice_rest.push_back(SubmitAs(a_, quick));
  const std::int64_t b1 = SubmitAs(b_, quick);
  ASSERT_TRUE(d.Barrier());

  // The queue says why alice's jobs wait: her priority below bob's, her use, bob's job ahead.
  // (alice_rest[0] already waits for the GPU under its supervisor, the one place of the cap.)
  RunResult table = d.Gpulane({"queue"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  json queue = d.Queue();
  auto reason_of = [&](std::int64_t id) {
    for (const auto& job : queue)
      if (job["id"] == id) return job.value("reason", "");
    return std::string("(not listed)");
  };
  const std::string waits = reason_of(alice_rest[1]);
  EXPECT_TRUE(Contains(waits, "priority 0.")) << waits;
  EXPECT_TRUE(Contains(waits, a_.name + " used")) << waits;
  EXPECT_TRUE(Contains(waits, fmt::format("behind {}'s job {}", b_.name, b1))) << waits;
  EXPECT_TRUE(Contains(reason_of(b1), "fair share 1.000")) << reason_of(b1);
  EXPECT_TRUE(Contains(table.out, fmt::format("behind {}'s job {}", b_.name, b1))) << table.out;

  // `gpulane share`: both users, alice (all of the use so far) with the lower factor.
  RunResult share = d.GpulaneAs(b_, {"share", "--json"});
  ASSERT_EQ(share.exit_code, 0) << share.err;
  json users = json::parse(share.out)["users"];
  ASSERT_EQ(users.size(), 2u) << share.out;
  std::map<std::string, double> factor;
  for (const auto& u : users) factor[u["user"]] = u["fair_share"];
  EXPECT_LT(factor[a_.name], 0.5) << share.out;
  EXPECT_EQ(factor[b_.name], 1.0) << share.out;
  RunResult share_table = d.Gpulane({"share"});
  EXPECT_EQ(share_table.exit_code, 0) << share_table.err;
  EXPECT_TRUE(Contains(share_table.out, "FAIRSHARE")) << share_table.out;

  Touch(gate);
  std::vector<std::string> all = {"wait", std::to_string(a1), std::to_string(b1)};
  for (auto id : alice_rest) all.push_back(std::to_string(id));
  RunResult wait = d.Gpulane(all);
  ASSERT_EQ(wait.exit_code, 0) << wait.out << wait.err;
  // Start order: alice's first, the one already waiting for the GPU, then bob's, then hers.
  std::vector<std::int64_t> starts;
  for (const Mark& m : ReadMarks(log))
    if (m.kind == "start") starts.push_back(m.id);
  const std::vector<std::int64_t> expected = {a1, alice_rest[0], b1, alice_rest[1], alice_rest[2], alice_rest[3]};
  EXPECT_EQ(starts, expected) << ReadFile(log);
}

}  // namespace
}  // namespace gpulane::test
